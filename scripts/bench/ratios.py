"""The figures issue 18 is judged by, from one `scripts/bench.sh` session: each target's CPU per
request against the bare aiohttp relay's (the floor for this stack) and Portkey's against the
gateway's, by mode, with the c=1 latency over direct and the streams' time to first byte.

    python3 scripts/bench/ratios.py RAW.jsonl --since 2026-11-27T01:00:00

Reads the harness's raw results (one JSON object per run); medians over the repetitions of a cell.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from typing import Any

FLOOR = "bare-aiohttp"
PEER = "portkey"
# The time-to-first-byte rows of a streaming mode (the harness's `TTFB=1` runs).
TTFB_OF = {"stream": "ttfb", "chat-stream": "chat-ttfb"}


def _cells(path: str, since: str) -> dict[tuple[str, str, int], list[dict[str, Any]]]:
    cells: dict[tuple[str, str, int], list[dict[str, Any]]] = defaultdict(list)
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            if row.get("ts", "") >= since:
                cells[row["target"], row["mode"], int(row.get("conns", 1))].append(row)
    return cells


def _median(rows: list[dict[str, Any]], *path: str) -> float | None:
    values = []
    for row in rows:
        value: Any = row
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, int | float):
            values.append(float(value))
    return statistics.median(values) if values else None


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def report(cells: dict[tuple[str, str, int], list[dict[str, Any]]]) -> str:
    modes = sorted({mode for _, mode, _ in cells if mode not in TTFB_OF.values()})
    targets = sorted({target for target, _, _ in cells if target != "direct"})
    busiest = max((conns for _, _, conns in cells), default=64)
    lines = []
    for mode in modes:
        cpu = {t: _median(cells.get((t, mode, busiest), []), "target_cpu_us_per_req") for t in targets}
        p50 = {t: _median(cells.get((t, mode, 1), []), "lat_us", "p50") for t in [*targets, "direct"]}
        ttfb = {t: _median(cells.get((t, TTFB_OF.get(mode, ""), 1), []), "ttfb_us", "p50") for t in targets}
        ttfb_direct = _median(cells.get(("direct", TTFB_OF.get(mode, ""), 1), []), "ttfb_us", "p50")
        lines += [
            f"\n### {mode}: CPU per request at c={busiest}, latency at c=1\n",
            f"| target | CPU µs/req | ÷ {FLOOR} | {PEER} ÷ it | c=1 p50 over direct ms | TTFB over direct ms |",
            "|---|---|---|---|---|---|",
        ]
        for target in targets:
            floor, own, peer = cpu.get(FLOOR), cpu[target], cpu.get(PEER)
            over = p50[target] - p50["direct"] if p50[target] is not None and p50["direct"] is not None else None
            first = ttfb[target] - ttfb_direct if ttfb[target] is not None and ttfb_direct is not None else None
            lines.append(
                f"| {target} | {_fmt(own, ',.0f')} | {_fmt(own / floor if own and floor else None, '.2f')} | "
                f"{_fmt(peer / own if peer and own and target != PEER else None, '.2f')} | "
                f"{_fmt(over / 1000 if over is not None else None, '.3f')} | "
                f"{_fmt(first / 1000 if first is not None else None, '.3f')} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("raw")
    parser.add_argument("--since", default="")
    args = parser.parse_args()
    print(report(_cells(args.raw, args.since)))


if __name__ == "__main__":
    main()
