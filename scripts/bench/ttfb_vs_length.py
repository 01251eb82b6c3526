"""Time to first streamed byte through the gateway, for streams of growing length.

Starts a loopback upstream process that streams `max_tokens` events back to back, then the
gateway and the bare aiohttp relay (each a process pinned to CPU 1 with taskset when there are two
cores) in front of it, and measures for each length the p50 time from sending the request to
the first body byte (TTFB) and to the last byte (TTLB): directly, through the bare relay, and
through the gateway. A relay that forwards as it receives keeps TTFB far below TTLB as streams grow.

    .venv/bin/python scripts/bench/ttfb_vs_length.py [--requests 100] [--lengths 10,100,1000,10000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import orjson
from aiohttp import web

UPSTREAM_PORT, GATEWAY_PORT, BARE_PORT = 18081, 18080, 18090
BARE_RELAY = Path(__file__).resolve().parents[3] / "shared" / "bench" / "limit" / "bare_relay.py"
EVENT = (
    b'data: {"id":"c","object":"text_completion","created":1,"model":"m",'
    b'"choices":[{"text":"tok","index":0,"logprobs":null,"finish_reason":null}]}\n\n'
)


async def upstream_stream(request: web.Request) -> web.StreamResponse:
    length = orjson.loads(await request.read())["max_tokens"]
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    for _ in range(length):
        await response.write(EVENT)
    await response.write(b"data: [DONE]\n\n")
    return response


async def measure(session: aiohttp.ClientSession, url: str, length: int, requests: int) -> tuple[float, float]:
    body = orjson.dumps({"model": "m", "prompt": "x", "stream": True, "max_tokens": length})
    first, last = [], []
    for _ in range(requests):
        started = time.perf_counter()
        async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as response:
            assert response.status == 200, await response.text()
            await response.content.readany()
            first.append(time.perf_counter() - started)
            await response.read()
        last.append(time.perf_counter() - started)
    return statistics.median(first) * 1000, statistics.median(last) * 1000


async def wait_for_port(port: int) -> None:
    for _ in range(100):
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.1)
            continue
        writer.close()
        return
    raise SystemExit(f"nothing listens on {port}")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--lengths", default="10,100,1000,10000")
    args = parser.parse_args()
    upstream = f"http://127.0.0.1:{UPSTREAM_PORT}/v1"
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as config:
        deployment = f"{{name: m, provider: {{type: openai, base_url: '{upstream}'}}}}"
        config.write(f"server: {{port: {GATEWAY_PORT}}}\ndeployments:\n  - {deployment}\n")
    pin = ["taskset", "-c", "1"] if shutil.which("taskset") and (os.cpu_count() or 1) > 1 else []
    bin_dir = Path(sys.executable).parent
    commands = [
        [sys.executable, __file__, "--serve-upstream"],
        [*pin, str(bin_dir / "gateway"), "serve", "-c", config.name, "--log-level", "WARNING"],
        [*pin, sys.executable, str(BARE_RELAY), str(BARE_PORT)],
    ]
    env = {**os.environ, "MOCK_UPSTREAM_BASE": upstream}
    processes = [await asyncio.create_subprocess_exec(*command, env=env) for command in commands]
    targets = {"direct": UPSTREAM_PORT, "bare relay": BARE_PORT, "gateway": GATEWAY_PORT}
    try:
        for port in targets.values():
            await wait_for_port(port)
        print("| events | " + " | ".join(f"{name} TTFB / TTLB p50 ms" for name in targets) + " |")
        print("|---" * (len(targets) + 1) + "|")
        async with aiohttp.ClientSession() as session:
            for length in [int(n) for n in args.lengths.split(",")]:
                cells = []
                for port in targets.values():
                    ttfb, ttlb = await measure(
                        session, f"http://127.0.0.1:{port}/v1/completions", length, args.requests
                    )
                    cells.append(f"{ttfb:.3f} / {ttlb:.3f}")
                print(f"| {length} | " + " | ".join(cells) + " |")
    finally:
        for process in processes:
            process.terminate()
            await process.wait()
        os.unlink(config.name)


def serve_upstream() -> None:
    app = web.Application()
    app.router.add_post("/v1/completions", upstream_stream)
    web.run_app(app, host="127.0.0.1", port=UPSTREAM_PORT, access_log=None, print=None)


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve-upstream"]:
        serve_upstream()
    else:
        asyncio.run(main())
