"""Benchmark of `POST /v1/embeddings`, with the issue's two criteria checked (PASS/FAIL):

- local: texts per second of a local encoder served through the gateway (real HTTP on loopback,
  `--clients` concurrent callers of `--per-request` texts each) against `sentence-transformers`
  encoding the same texts in-process (in a process of its own: torch's threads and OpenMP teams are
  per process, and two in one slow each other) with the same batch size, folder and torch threads
  (`--threads`: on a machine with other load, fewer threads than cores is faster for both); the
  gateway must reach 80% of it. The folder is a randomly initialised BERT (`--hidden`,
  `--layers`) in sentence-transformers' layout, built offline. The two are measured in alternating
  rounds (`--rounds`) and each side's median is compared, so a neighbour's load weighs on both.
- upstream: the gateway's own CPU seconds per request for an embeddings call and for a chat call,
  each relayed from the same loopback fake upstream. Client, fake and gateway share this process, so
  each path is also driven straight at the fake (no gateway) and that cost subtracted: what remains is
  the gateway's hop alone (the fake answers an embeddings request with more work than a chat one,
  which would otherwise count against the gateway). Embeddings must cost within 10% of chat.

    .venv/bin/python scripts/bench/embeddings.py [--texts N] [--clients N] [--per-request N]
        [--batch N] [--requests N] [--rounds N] [--hidden N] [--layers N] [--threads N] [--only local|upstream]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import yaml
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer

from gateway.app import create_app
from gateway.config.loader import parse_config
from tests.support.encoder_model import VOCABULARY
from tests.support.fake_upstream import FakeUpstream

WORDS = VOCABULARY[:20]  # words the tiny encoder's vocabulary spells whole


def texts(count: int) -> list[str]:
    return [" ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(4 + i % 18)) for i in range(count)]


async def serve(config: dict[str, Any]) -> TestServer:
    server = TestServer(create_app(parse_config(yaml.safe_dump(config), {}, source="bench.yaml")))
    await server.start_server()
    return server


async def local(args: argparse.Namespace) -> bool:
    import torch

    from tests.support.encoder_model import encoder_dir

    folder = encoder_dir("mean", True, hidden=args.hidden, layers=args.layers)
    corpus = texts(args.texts)
    threads = args.threads or torch.get_num_threads()  # both sides alike (default: torch's own default)

    provider = {
        "type": "local",
        "model": str(folder),
        "device": "cpu",
        "max_batch": args.batch,
        "threads": threads,
    }
    provider |= {"max_queue": 100_000, "max_sequences_per_request": 2048}
    gateway = await serve({"deployments": [{"name": "enc", "provider": provider, "timeout_s": 600}]})
    url = gateway.make_url("/v1/embeddings")
    chunks = [corpus[i : i + args.per_request] for i in range(0, len(corpus), args.per_request)]
    direct_runs, through_runs = [], []
    try:
        async with ClientSession() as http:

            async def clients(work: list[list[str]]) -> None:
                queue: asyncio.Queue[list[str]] = asyncio.Queue()
                for chunk in work:
                    queue.put_nowait(chunk)

                async def client() -> None:
                    while not queue.empty():
                        chunk = queue.get_nowait()
                        body = {"model": "enc", "input": chunk, "encoding_format": "base64"}
                        async with http.post(url, json=body) as response:
                            assert response.status == 200, await response.text()
                            await response.read()

                await asyncio.gather(*(client() for _ in range(args.clients)))

            await clients(chunks[: args.clients])  # warm
            for _ in range(args.rounds):  # alternating: a neighbour's load weighs on both sides
                direct_runs.append(await in_process(folder, corpus, args.batch, threads))
                began = time.perf_counter()
                await clients(chunks)
                through_runs.append(len(corpus) / (time.perf_counter() - began))
    finally:
        await gateway.close()
    direct, through = statistics.median(direct_runs), statistics.median(through_runs)
    print(
        f"local ({args.hidden} hidden, {args.layers} layers, batch {args.batch}, {threads} torch threads, "
        f"{len(corpus)} texts): rounds in-process {_rates(direct_runs)}, gateway {_rates(through_runs)} texts/s"
    )
    ratio = through / direct
    print(f"local: sentence-transformers {direct:.0f} texts/s, gateway {through:.0f} texts/s, {ratio:.0%}")
    passed = ratio >= 0.8
    print(f"  {'PASS' if passed else 'FAIL'}: gateway >= 80% of sentence-transformers")
    return passed


async def upstream(args: argparse.Namespace) -> bool:
    fake = FakeUpstream()
    fake_server = TestServer(fake.app())
    await fake_server.start_server()
    base_url = str(fake_server.make_url("/v1"))
    gateway = await serve({"deployments": [{"name": "up", "provider": {"type": "openai", "base_url": base_url}}]})
    chat = ("/chat/completions", {"model": "up", "messages": [{"role": "user", "content": "one two three"}]})
    embed = ("/embeddings", {"model": "up", "input": ["one two three"], "encoding_format": "base64"})
    through_base, bare_base = str(gateway.make_url("/v1")), base_url
    try:
        async with ClientSession() as http:

            async def cpu_per_request(url: str, body: dict[str, Any]) -> float:
                for _ in range(50):  # warm
                    async with http.post(url, json=body) as response:
                        await response.read()
                began = time.process_time()
                for _ in range(args.requests):
                    async with http.post(url, json=body) as response:
                        await response.read()
                return (time.process_time() - began) / args.requests

            runs: dict[str, list[float]] = {"chat": [], "embeddings": []}
            totals: dict[str, list[float]] = {"chat": [], "embeddings": []}
            for _ in range(args.rounds):  # interleaved rounds: a noisy neighbour weighs on both
                for name, (path, body) in (("chat", chat), ("embeddings", embed)):
                    through = await cpu_per_request(through_base + path, body)
                    bare = await cpu_per_request(bare_base + path, body)
                    totals[name].append(through)
                    runs[name].append(through - bare)
    finally:
        await gateway.close()
        await fake_server.close()
    chat_s, embed_s = statistics.median(runs["chat"]), statistics.median(runs["embeddings"])
    chat_total, embed_total = statistics.median(totals["chat"]), statistics.median(totals["embeddings"])
    ratio = embed_s / chat_s
    print(
        f"upstream: the gateway's own CPU per request, chat {chat_s * 1e6:.0f} us, embeddings {embed_s * 1e6:.0f} us "
        f"({ratio:.2f}x); with client and fake: chat {chat_total * 1e6:.0f} us, embeddings {embed_total * 1e6:.0f} us"
    )
    passed = ratio <= 1.10
    print(f"  {'PASS' if passed else 'FAIL'}: embeddings within 10% of chat")
    return passed


async def in_process(folder: Path, corpus: list[str], batch: int, threads: int) -> float:
    """sentence-transformers' texts/s on `corpus`, in a process of its own: torch's thread settings and
    OpenMP thread teams are per process, so measured beside the engine each would slow the other."""
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _IN_PROCESS, str(folder), str(batch), str(threads),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    out, _ = await child.communicate(json.dumps(corpus).encode())
    assert child.returncode == 0, "sentence-transformers failed"
    return float(out.decode().split()[-1])


_IN_PROCESS = """
import json, sys, time
import torch
from sentence_transformers import SentenceTransformer  # the library people would otherwise call
folder, batch, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(threads)
corpus = json.load(sys.stdin)
model = SentenceTransformer(folder, device="cpu")
model.encode(corpus[:batch], batch_size=batch)  # warm
began = time.perf_counter()
model.encode(corpus, batch_size=batch)
print(len(corpus) / (time.perf_counter() - began))
"""


def _rates(runs: list[float]) -> str:
    return "/".join(f"{rate:.0f}" for rate in runs)


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--texts", type=int, default=2048)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--per-request", type=int, default=32)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--hidden", type=int, default=384)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, help="torch threads of both sides (default: torch's default)")
    parser.add_argument("--only", choices=("local", "upstream"))
    args = parser.parse_args()
    results = []
    if args.only != "local":
        results.append(await upstream(args))
    if args.only != "upstream":
        results.append(await local(args))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
