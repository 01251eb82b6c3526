"""The gateway hop's cost in CPU instructions per request: a figure that does not move with the load
on a shared machine, unlike CPU time (valgrind's callgrind counts instructions, not seconds).

Each target (direct: the stub upstream alone; bare: the bare aiohttp relay; gateway: the benchmark
configuration of `hot_path.py`) is driven in `hot_path.py`'s process under callgrind twice, with no
requests and with N after the same warm-up, so the difference over N is the instructions of one
request, start-up excluded. The hop is a target's figure minus direct's, and "x bare" the gateway's
hop over the bare relay's: the in-process counterpart of the harness's CPU ratio. Each run takes a
minute or two (valgrind runs Python about 50 times slower); it asserts nothing.

    .venv/bin/python scripts/bench/instructions.py [--requests 400]
        [--mode json|sse|chat|chat-sse|chat-system|embeddings|messages|messages-sse|native|native-sse ...]
        [--targets direct bare gateway] [--tracing]

`--tracing`: the gateway samples every request, and its spans are flushed before the count ends, so
the export thread's encoding is in the figure too.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

HOT_PATH = Path(__file__).with_name("hot_path.py")
sys.path.insert(0, str(HOT_PATH.parent))
from hot_path import MODES  # noqa: E402 (after the path it is found on)

TARGETS = ("direct", "bare", "gateway")


def instructions(target: str, mode: str, requests: int, tracing: bool) -> int:
    """Instructions of one run of `hot_path.py --drive`, start-up and warm-up included."""
    command = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        str(HOT_PATH),
        "--drive",
        target,
        "--mode",
        mode,
        "--requests",
        str(requests),
        *(["--tracing"] if tracing else []),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=True)  # noqa: S603 (our own argv)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit(f"no instruction count in valgrind's output:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument(
        "--mode",
        nargs="+",
        default=["json", "sse"],
        choices=[*MODES],
    )
    parser.add_argument("--tracing", action="store_true", help="the gateway traces every request (export included)")
    parser.add_argument("--targets", nargs="+", default=list(TARGETS), choices=TARGETS)
    args = parser.parse_args()
    print(f"{'mode':9} {'target':8} {'instr/req':>10} {'hop':>10} {'x bare':>7}")
    for mode in args.mode:
        per_request = {
            target: (
                instructions(target, mode, args.requests, args.tracing) - instructions(target, mode, 0, args.tracing)
            )
            / args.requests
            for target in args.targets
        }
        direct, bare = per_request.get("direct"), per_request.get("bare")
        for target, count in per_request.items():
            hop = count - direct if direct is not None else None
            ratio = hop / (bare - direct) if hop is not None and bare is not None and direct is not None else None
            shown_hop = f"{hop:10.0f}" if hop is not None else f"{'-':>10}"
            shown_ratio = f"{ratio:7.2f}" if ratio is not None and target != "direct" else ""
            print(f"{mode:9} {target:8} {count:10.0f} {shown_hop} {shown_ratio}", flush=True)


if __name__ == "__main__":
    main()
