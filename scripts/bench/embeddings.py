"""Benchmark of `POST /v1/embeddings`, with the issue's two criteria checked (PASS/FAIL):

- local: texts per second of a local encoder served through the gateway (real HTTP on loopback,
  `--clients` concurrent callers of `--per-request` texts each) against `sentence-transformers`
  encoding the same texts in-process with the same batch size on the same folder; the gateway must
  reach 80% of it. The folder is a randomly initialised BERT (`--hidden`, `--layers`) in
  sentence-transformers' layout, built offline.
- upstream: the gateway process's CPU seconds per request for an embeddings call and for a chat
  call, each relayed from the same loopback fake upstream (its CPU, in this process too, is counted
  on both sides); embeddings must cost within 10% of chat.

    .venv/bin/python scripts/bench/embeddings.py [--texts N] [--clients N] [--per-request N]
        [--batch N] [--requests N] [--hidden N] [--layers N]
"""

from __future__ import annotations

import argparse
import asyncio
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
from tests.fake_upstream import FakeUpstream

WORDS = [
    "the",
    "cat",
    "sat",
    "on",
    "mat",
    "a",
    "dog",
    "ran",
    "in",
    "park",
    "sky",
    "is",
    "blue",
    "red",
    "apples",
    "green",
    "pears",
    "grow",
    "hello",
    "world",
]


def texts(count: int) -> list[str]:
    return [" ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(4 + i % 18)) for i in range(count)]


async def serve(config: dict[str, Any]) -> TestServer:
    server = TestServer(create_app(parse_config(yaml.safe_dump(config), {}, source="bench.yaml")))
    await server.start_server()
    return server


async def local(args: argparse.Namespace) -> bool:
    from sentence_transformers import SentenceTransformer  # the library people would otherwise call

    from tests.encoder_model import encoder_dir

    folder = encoder_dir("mean", True, hidden=args.hidden, layers=args.layers)
    corpus = texts(args.texts)
    model = SentenceTransformer(str(folder), device="cpu")
    model.encode(corpus[: args.batch], batch_size=args.batch)  # warm
    began = time.perf_counter()
    model.encode(corpus, batch_size=args.batch)
    direct = len(corpus) / (time.perf_counter() - began)

    provider = {"type": "local", "model": str(folder), "device": "cpu", "max_batch": args.batch}
    provider |= {"max_queue": 100_000, "max_sequences_per_request": 2048}
    gateway = await serve({"deployments": [{"name": "enc", "provider": provider, "timeout_s": 600}]})
    url = gateway.make_url("/v1/embeddings")
    try:
        async with ClientSession() as http:
            chunks = [corpus[i : i + args.per_request] for i in range(0, len(corpus), args.per_request)]
            queue: asyncio.Queue[list[str]] = asyncio.Queue()

            async def client() -> None:
                while not queue.empty():
                    chunk = queue.get_nowait()
                    body = {"model": "enc", "input": chunk, "encoding_format": "base64"}
                    async with http.post(url, json=body) as response:
                        assert response.status == 200, await response.text()
                        await response.read()

            for chunk in chunks[: args.clients]:
                queue.put_nowait(chunk)
            await asyncio.gather(*(client() for _ in range(args.clients)))  # warm
            for chunk in chunks:
                queue.put_nowait(chunk)
            began = time.perf_counter()
            await asyncio.gather(*(client() for _ in range(args.clients)))
            through = len(corpus) / (time.perf_counter() - began)
    finally:
        await gateway.close()
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
    chat = ("/v1/chat/completions", {"model": "up", "messages": [{"role": "user", "content": "one two three"}]})
    embed = ("/v1/embeddings", {"model": "up", "input": ["one two three"], "encoding_format": "base64"})
    try:
        async with ClientSession() as http:

            async def cpu_per_request(path: str, body: dict[str, Any]) -> float:
                for _ in range(50):  # warm
                    async with http.post(gateway.make_url(path), json=body) as response:
                        await response.read()
                began = time.process_time()
                for _ in range(args.requests):
                    async with http.post(gateway.make_url(path), json=body) as response:
                        await response.read()
                return (time.process_time() - began) / args.requests

            chat_cpu, embed_cpu = [], []
            for _ in range(3):  # interleaved rounds: a noisy neighbour weighs on both
                chat_cpu.append(await cpu_per_request(*chat))
                embed_cpu.append(await cpu_per_request(*embed))
    finally:
        await gateway.close()
        await fake_server.close()
    chat_s, embed_s = sorted(chat_cpu)[1], sorted(embed_cpu)[1]
    ratio = embed_s / chat_s
    print(f"upstream: CPU per request, chat {chat_s * 1e6:.0f} us, embeddings {embed_s * 1e6:.0f} us ({ratio:.2f}x)")
    passed = ratio <= 1.10
    print(f"  {'PASS' if passed else 'FAIL'}: embeddings within 10% of chat")
    return passed


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--texts", type=int, default=2048)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--per-request", type=int, default=32)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--hidden", type=int, default=384)
    parser.add_argument("--layers", type=int, default=6)
    args = parser.parse_args()
    results = [await upstream(args), await local(args)]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
