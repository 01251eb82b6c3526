"""`scripts/bench.sh` ends with the ratios issue 18 is judged by (scripts/bench/ratios.py), computed
from the harness's raw rows: medians per cell, CPU over the bare relay's, Portkey's over ours."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.script_loader import load_script


def _ratios() -> Any:
    return load_script("scripts/bench/ratios.py")


def _row(
    target: str, mode: str, conns: int, cpu: float, p50_us: int, ts: str = "2026-11-27T01:00:00"
) -> dict[str, Any]:
    return {
        "target": target,
        "mode": mode,
        "conns": conns,
        "ts": ts,
        "target_cpu_us_per_req": cpu,
        "lat_us": {"p50": p50_us},
    }


def test_the_gateway_line_reads_its_cpu_over_the_bare_relay_and_portkey_over_it(tmp_path: Path) -> None:
    rows = [
        _row("direct", "json", 1, 10, 100),
        _row("bare-aiohttp", "json", 64, 100, 0),
        _row("bare-aiohttp", "json", 64, 120, 0),  # median of the two reps: 110
        _row("gateway", "json", 64, 154, 0),
        _row("gateway", "json", 1, 0, 400),
        _row("portkey", "json", 64, 616, 0),
        _row("gateway", "json", 64, 9_999, 0, ts="2026-11-26T00:00:00"),  # an earlier session: left out
    ]
    raw = tmp_path / "raw.jsonl"
    raw.write_text("".join(json.dumps(row) + "\n" for row in rows))

    ratios = _ratios()
    text = ratios.report(ratios._cells(str(raw), "2026-11-27T00:00:00"))

    gateway = next(line for line in text.splitlines() if line.startswith("| gateway |"))
    assert gateway == "| gateway | 154 | 1.40 | 4.00 | 0.300 | - |"
    assert "| bare-aiohttp | 110 | 1.00 |" in text
