"""The gateway hop's own cost, in one process: CPU µs and Python function calls per request.

A stub upstream (a raw asyncio protocol with canned answers) and the gateway app run on loopback
in this process; an aiohttp client sends N requests at concurrency C to the stub directly, then
through the gateway, alternately. The client's and the stub's work is the same in both, so the
difference is what the gateway adds: no harness, no second process, seconds per run. Use it to see
a regression before the full harness (`scripts/bench.sh`); it asserts nothing.

    .venv/bin/python scripts/bench/hot_path.py [--requests 4000] [--concurrency 32] [--rounds 3]
        [--mode json|sse|chat|chat-sse|chat-system|embeddings|messages|messages-sse|native|native-sse|both|all]
        [--tracing] [--profile stats.out [--profile-target bare]]

The gateway is configured as the issue's benchmark: an API key, one OpenAI-compatible deployment,
metrics and the JSON access log on (written to /dev/null), no cache, no guardrails, and the
start-up heap frozen as `gateway serve` does; beside it an `anthropic` deployment on the same stub
(which answers `/v1/messages` as Anthropic does) for the Messages API's native modes. The messages
modes' floor ("direct") is the stub's Anthropic answer, which is what a native call relays.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import cProfile
import gc
import json
import os
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gateway.app import create_app
from gateway.http.telemetry import TELEMETRY

try:
    from gateway.config.loader import parse_config
except ImportError:  # a tree from before the layout (to compare with, through PYTHONPATH)
    from gateway.config_loader import parse_config  # type: ignore[import-not-found,no-redef]
from gateway.workers import GC_THRESHOLDS, use_uvloop

KEY = "bench-key-0123456789abcdef0123456789"
JSON_BODY = (
    b'{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"text":" hello there",'
    b'"index":0,"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":2,'
    b'"total_tokens":7}}'
)
SSE_EVENTS = [
    b'data: {"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"text":" t%d","index":0,'
    b'"logprobs":null,"finish_reason":null}]}\n\n' % i
    for i in range(8)
] + [b"data: [DONE]\n\n"]
CHAT_BODY = (
    b'{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":'
    b'{"role":"assistant","content":" hello there","refusal":null},"logprobs":null,"finish_reason":"stop"}],'
    b'"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}'
)
CHAT_EVENTS = [
    b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
    b'"delta":{"content":" t%d"},"logprobs":null,"finish_reason":null}]}\n\n' % i
    for i in range(8)
] + [b"data: [DONE]\n\n"]
# As ../shared/bench/bodies/chat.json asks: a system and a user message.
CHAT_REQUEST = (
    b'{"model":"m","messages":[{"role":"system","content":"You are a helpful assistant."},'
    b'{"role":"user","content":"Say hello."}],"max_tokens":16,"temperature":0}'
)
MESSAGES_REQUEST = (
    b'{"model":"m","max_tokens":16,"system":"You are a helpful assistant.",'
    b'"messages":[{"role":"user","content":"Say hello."}],"temperature":0}'
)
# What an Anthropic deployment answers (the Messages API), plain and streamed: the same text.
ANTHROPIC_BODY = (
    b'{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[{"type":"text",'
    b'"text":" hello there"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":5,'
    b'"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":2}}'
)


def _event(kind: str, data: bytes) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + data + b"\n\n"


ANTHROPIC_EVENTS = [
    _event(
        "message_start",
        b'{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude",'
        b'"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1}}}',
    ),
    _event(
        "content_block_start", b'{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}'
    ),
    _event("ping", b'{"type":"ping"}'),
    *(
        _event(
            "content_block_delta",
            b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" t%d"}}' % i,
        )
        for i in range(8)
    ),
    _event("content_block_stop", b'{"type":"content_block_stop","index":0}'),
    _event(
        "message_delta",
        b'{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":8}}',
    ),
    _event("message_stop", b'{"type":"message_stop"}'),
]
# An embeddings answer as OpenAI gives the `openai` SDK by default: 1536 float32s in base64.
EMBEDDINGS_BODY = (
    b'{"object":"list","data":[{"object":"embedding","index":0,"embedding":"%s"}],"model":"m",'
    b'"usage":{"prompt_tokens":1,"total_tokens":1}}' % base64.b64encode(bytes(range(256)) * 24)
)
# The modes: (path, request body, whether it streams).
MODES = {
    "json": ("/v1/completions", b'{"model":"m","prompt":"hello","max_tokens":8}', False),
    "sse": ("/v1/completions", b'{"model":"m","prompt":"hello","max_tokens":8,"stream":true}', True),
    "chat": (
        "/v1/chat/completions",
        b'{"model":"m","messages":[{"role":"user","content":"hello"}],"max_tokens":8}',
        False,
    ),
    "chat-sse": (
        "/v1/chat/completions",
        CHAT_REQUEST[:-1] + b',"stream":true}',
        True,
    ),
    "chat-system": ("/v1/chat/completions", CHAT_REQUEST, False),  # the plain twin of chat-sse
    "embeddings": ("/v1/embeddings", b'{"model":"m","input":"hello","encoding_format":"base64"}', False),
    # The Messages API: translated onto the chat upstream, and native on the `anthropic` deployment.
    "messages": ("/v1/messages", MESSAGES_REQUEST, False),
    "messages-sse": ("/v1/messages", MESSAGES_REQUEST[:-1] + b',"stream":true}', True),
    "native": ("/v1/messages", MESSAGES_REQUEST.replace(b'"m"', b'"claude"', 1), False),
    "native-sse": ("/v1/messages", MESSAGES_REQUEST.replace(b'"m"', b'"claude"', 1)[:-1] + b',"stream":true}', True),
}


def _answer(body: bytes | None, events: list[bytes]) -> bytes:
    if body is not None:
        return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(event), event) for event in events) + b"0\r\n\r\n"
    return b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks


ANSWERS = {  # by (chat, stream)
    (False, False): _answer(JSON_BODY, []),
    (False, True): _answer(None, SSE_EVENTS),
    (True, False): _answer(CHAT_BODY, []),
    (True, True): _answer(None, CHAT_EVENTS),
}
EMBEDDINGS_ANSWER = _answer(EMBEDDINGS_BODY, [])
ANTHROPIC_ANSWERS = {False: _answer(ANTHROPIC_BODY, []), True: _answer(None, ANTHROPIC_EVENTS)}


class CannedServer(asyncio.Protocol):
    """An HTTP/1.1 server of canned answers: each request is answered (`answer(head, body)`) once
    its headers and its Content-Length body have arrived."""

    def __init__(self) -> None:
        self.buffer = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: asyncio.Transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            head = self.buffer[:end].lower()
            start = head.find(b"content-length:")
            line_end = head.find(b"\r\n", start)
            length = int(head[start + 15 : line_end if line_end >= 0 else None]) if start >= 0 else 0
            total = end + 4 + length
            if len(self.buffer) < total:
                return
            body, self.buffer = self.buffer[end + 4 : total], self.buffer[total:]
            self.transport.write(self.answer(head, body))

    def answer(self, head: bytes, body: bytes) -> bytes:
        raise NotImplementedError


class StubUpstream(CannedServer):
    """The upstream: a completion or chat answer, JSON or a stream, as the request asks."""

    def answer(self, head: bytes, body: bytes) -> bytes:
        line = head.split(b"\r\n", 1)[0]
        if b"/embeddings" in line:
            return EMBEDDINGS_ANSWER
        if b"/messages" in line:  # as Anthropic answers
            return ANTHROPIC_ANSWERS[b'"stream":true' in body]
        return ANSWERS[b"/chat/" in line, b'"stream":true' in body]


def bare_relay(upstream: str) -> web.Application:  # `upstream`: its origin
    """The floor: ../shared/bench/limit/bare_relay.py's relay (no features), in this process."""
    session_key = web.AppKey("session", aiohttp.ClientSession)

    async def relay(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        session = request.app[session_key]
        async with session.post(upstream + request.path, data=body, headers={"Content-Type": "application/json"}) as up:
            content_type = up.headers.get("Content-Type", "")
            if content_type.startswith("text/event-stream"):
                response = web.StreamResponse(status=up.status, headers={"Content-Type": content_type})
                await response.prepare(request)
                async for chunk in up.content.iter_any():
                    await response.write(chunk)
                await response.write_eof()
                return response
            return web.Response(status=up.status, body=await up.read(), content_type="application/json")

    async def session(app: web.Application) -> AsyncIterator[None]:
        app[session_key] = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        yield
        await app[session_key].close()

    app = web.Application()
    app.cleanup_ctx.append(session)
    app.router.add_post("/v1/completions", relay)
    app.router.add_post("/v1/chat/completions", relay)
    app.router.add_post("/v1/embeddings", relay)
    app.router.add_post("/v1/messages", relay)
    return app


async def serve(app: web.Application) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]


class OtlpSink(CannedServer):
    """A collector that takes every export and answers 200 (the exporter's protobuf work is the cost measured)."""

    def answer(self, head: bytes, body: bytes) -> bytes:
        return b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"


def config(upstream_port: int, tracing_port: int | None = None) -> dict[str, Any]:
    return {
        "server": {"host": "127.0.0.1", "port": 0},
        "keys": [{"name": "bench", "key": "${HOT_PATH_KEY}"}],
        "deployments": [
            {
                "name": "m",
                "provider": {"type": "openai", "base_url": f"http://127.0.0.1:{upstream_port}/v1"},
                "timeout_s": 30,
            },
            {  # the Messages API's native modes
                "name": "claude",
                "provider": {
                    "type": "anthropic",
                    "base_url": f"http://127.0.0.1:{upstream_port}",
                    "api_key": "${HOT_PATH_ANTHROPIC_KEY}",
                },
                "timeout_s": 30,
            },
        ],
        "observability": {
            "access_log": {"enabled": True, "format": "json", "path": os.devnull},
            "tracing": {"enabled": True, "endpoint": f"http://127.0.0.1:{tracing_port}", "sampler": "always_on"}
            if tracing_port
            else {"enabled": False},
        },
    }


async def drive(url: str, body: bytes, requests: int, concurrency: int, session: aiohttp.ClientSession) -> None:
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"}
    left = requests

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            async with session.post(url, data=body, headers=headers) as response:
                await response.read()
                if response.status != 200:
                    raise SystemExit(f"{url}: HTTP {response.status}: {await response.text()}")

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def measure(run: Callable[[], Awaitable[None]], profiler: cProfile.Profile | None) -> float:
    start = time.process_time()
    if profiler is not None:
        profiler.enable()
    await run()
    if profiler is not None:
        profiler.disable()
    return time.process_time() - start


def count_calls(run: Callable[[], Awaitable[None]]) -> Callable[[], Awaitable[int]]:
    async def counted() -> int:
        calls = 0

        def tracer(frame: Any, event: str, arg: Any) -> None:
            nonlocal calls
            if event == "call":
                calls += 1

        sys.setprofile(tracer)
        try:
            await run()
        finally:
            sys.setprofile(None)
        return calls

    return counted


async def main(args: argparse.Namespace) -> None:
    loop = asyncio.get_running_loop()
    stub = await loop.create_server(StubUpstream, "127.0.0.1", 0)
    upstream_port = stub.sockets[0].getsockname()[1]
    tracing_port = None
    if args.tracing:  # every request traced, exported to a sink on loopback
        sink = await loop.create_server(OtlpSink, "127.0.0.1", 0)
        tracing_port = sink.sockets[0].getsockname()[1]
    text = json.dumps(config(upstream_port, tracing_port))
    loaded = parse_config(
        text, {**os.environ, "HOT_PATH_KEY": KEY, "HOT_PATH_ANTHROPIC_KEY": "sk-ant-bench"}, "hot_path"
    )
    app = create_app(loaded)
    runner, gateway_port = await serve(app)
    bare_runner, bare_port = await serve(bare_relay(f"http://127.0.0.1:{upstream_port}"))
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    origins = {
        "direct": f"http://127.0.0.1:{upstream_port}",
        "gateway": f"http://127.0.0.1:{gateway_port}",
        "bare": f"http://127.0.0.1:{bare_port}",
    }
    if args.drive:  # for scripts/bench/instructions.py: warm up, drive, leave (no report)
        path, body, _ = MODES[args.mode]
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
            url = origins[args.drive] + path
            await drive(url, body, 64, 16, session)
            if args.requests:
                await drive(url, body, args.requests, 16, session)
        tracing = app[TELEMETRY].tracing
        if tracing is not None:  # every span encoded and posted: the export thread's work counts too
            await asyncio.to_thread(tracing.provider.force_flush)
        os._exit(0)  # the instruction count ends here: no teardown in it
    profiler = cProfile.Profile() if args.profile else None
    modes = ["json", "sse"] if args.mode == "both" else list(MODES) if args.mode == "all" else [args.mode]
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        print(f"{'mode':8} {'target':8} {'µs/req':>8} {'calls/req':>10} {'x bare':>7}  (through it minus direct)")
        for mode in modes:
            path, body, _ = MODES[mode]

            def run(
                target: str, n: int = args.requests, path: str = path, body: bytes = body
            ) -> Callable[[], Awaitable[None]]:
                return lambda: drive(origins[target] + path, body, n, args.concurrency, session)

            for target in origins:  # warm every path up
                await run(target, args.requests // 4)()
            costs: dict[str, list[float]] = {"bare": [], "gateway": []}
            for _ in range(args.rounds):  # alternated, so that a noisy stretch hits both
                for target in costs:
                    direct = await measure(run("direct"), None)
                    through = await measure(run(target), profiler if target == args.profile_target else None)
                    costs[target].append((through - direct) / args.requests * 1e6)
            sample = max(200, args.requests // 10)
            direct_calls = await count_calls(run("direct", sample))()
            floor = statistics.median(costs["bare"])
            for target, samples in costs.items():
                calls = (await count_calls(run(target, sample))() - direct_calls) / sample
                cost = statistics.median(samples)
                rounds = ", ".join(f"{c:.0f}" for c in samples)
                print(f"{mode:8} {target:8} {cost:8.1f} {calls:10.0f} {cost / floor:7.2f}   rounds: {rounds}")
    await runner.cleanup()
    await bare_runner.cleanup()
    stub.close()
    if profiler is not None:
        profiler.dump_stats(args.profile)
        print(f"profile of the {args.profile_target} rounds: {args.profile}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mode", choices=[*MODES, "both", "all"], default="both", help="both: json and sse")
    parser.add_argument("--tracing", action="store_true", help="trace every request (OTLP to a loopback sink)")
    parser.add_argument("--profile", metavar="FILE")
    parser.add_argument("--profile-target", choices=["gateway", "bare"], default="gateway")
    parser.add_argument("--drive", choices=["direct", "bare", "gateway"], help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    use_uvloop()
    asyncio.run(main(arguments))
