"""`scripts/bench/responses.py --native`: `/v1/responses` by native pass-through (`responses: native`)
against `/v1/chat/completions` relayed to the same upstream, each less its direct floor (see there).

hot_path.py's canned stub answers `/v1/responses` here as OpenAI does, with the same text as its
chat answers: a `response` of one message, or the 16 semantic events around its 8 text deltas."""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics

import aiohttp
from hot_path import CHAT_REQUEST, KEY, StubUpstream, _answer, config, drive, measure, serve

from gateway.app import create_app
from gateway.config.loader import parse_config
from gateway.workers import GC_THRESHOLDS

BOUND = 1.05  # as the Messages API's native pass-through
RESPONSES_REQUEST = (
    b'{"model":"gpt","instructions":"You are a helpful assistant.",'
    b'"input":[{"role":"user","content":"Say hello."}],"max_output_tokens":16,"temperature":0}'
)
STREAMED = b',"stream":true}'
PAIRS = {  # mode: (chat body, responses body)
    "json": (CHAT_REQUEST, RESPONSES_REQUEST),
    "stream": (CHAT_REQUEST[:-1] + STREAMED, RESPONSES_REQUEST[:-1] + STREAMED),
}
_ITEM = b'{"id":"msg_1","type":"message","status":"%s","role":"assistant","content":[%s]}'
_TEXT = b'{"type":"output_text","annotations":[],"logprobs":[],"text":"%s"}'
_WHOLE = b"".join(b" t%d" % i for i in range(8))
_USAGE = (
    b'{"input_tokens":5,"input_tokens_details":{"cached_tokens":0},"output_tokens":8,'
    b'"output_tokens_details":{"reasoning_tokens":0},"total_tokens":13}'
)


def _response(status: bytes, output: bytes, usage: bytes) -> bytes:
    return (
        b'{"id":"resp_1","object":"response","created_at":1,"status":"%s","error":null,"incomplete_details":null,'
        b'"instructions":"You are a helpful assistant.","max_output_tokens":16,"model":"gpt-up","output":[%s],'
        b'"parallel_tool_calls":true,"previous_response_id":null,"store":true,"temperature":0.0,'
        b'"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[],"top_p":1.0,"truncation":"disabled",'
        b'"usage":%s,"metadata":{}}'
    ) % (status, output, usage)


def _event(number: int, kind: bytes, fields: bytes) -> bytes:
    data = b'{"type":"%s","sequence_number":%d,%s}' % (kind, number, fields)
    return b"event: " + kind + b"\ndata: " + data + b"\n\n"


def _events() -> list[bytes]:
    started = _response(b"in_progress", b"", b"null")
    where = b'"item_id":"msg_1","output_index":0,"content_index":0'
    parts = [
        (b"response.created", b'"response":' + started),
        (b"response.in_progress", b'"response":' + started),
        (b"response.output_item.added", b'"output_index":0,"item":' + _ITEM % (b"in_progress", b"")),
        (b"response.content_part.added", where + b',"part":' + _TEXT % b""),
        *((b"response.output_text.delta", where + b',"delta":" t%d","logprobs":[]' % i) for i in range(8)),
        (b"response.output_text.done", where + b',"text":"%s","logprobs":[]' % _WHOLE),
        (b"response.content_part.done", where + b',"part":' + _TEXT % _WHOLE),
        (b"response.output_item.done", b'"output_index":0,"item":' + _ITEM % (b"completed", _TEXT % _WHOLE)),
        (
            b"response.completed",
            b'"response":' + _response(b"completed", _ITEM % (b"completed", _TEXT % _WHOLE), _USAGE),
        ),
    ]
    return [_event(number, kind, fields) for number, (kind, fields) in enumerate(parts)]


RESPONSES_ANSWERS = {
    False: _answer(_response(b"completed", _ITEM % (b"completed", _TEXT % _WHOLE), _USAGE), []),
    True: _answer(None, _events()),
}


class ResponsesStub(StubUpstream):
    """hot_path's stub, which also answers `/v1/responses` as OpenAI does."""

    def answer(self, head: bytes, body: bytes) -> bytes:
        if b"/responses" in head.split(b"\r\n", 1)[0]:
            return RESPONSES_ANSWERS[b'"stream":true' in body]
        return super().answer(head, body)


async def native(args: argparse.Namespace) -> bool:
    loop = asyncio.get_running_loop()
    stub = await loop.create_server(ResponsesStub, "127.0.0.1", 0)
    port = stub.sockets[0].getsockname()[1]
    settings = config(port)  # hot_path's: a key, the OpenAI-compatible deployment `m`, metrics and access log
    native_provider = {"type": "openai", "base_url": f"http://127.0.0.1:{port}/v1", "responses": "native"}
    settings["deployments"].append({"name": "gpt", "provider": native_provider, "timeout_s": 30})
    if args.redis:
        settings["redis"] = {"url": args.redis, "prefix": "bench:responses-native:"}
        settings["responses"] = {"retention_s": 60}
    env = {**os.environ, "HOT_PATH_KEY": KEY, "HOT_PATH_ANTHROPIC_KEY": "sk-ant-bench"}
    runner, gateway_port = await serve(create_app(parse_config(json.dumps(settings), env, "responses-bench")))
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    direct, gateway = f"http://127.0.0.1:{port}/v1", f"http://127.0.0.1:{gateway_port}/v1"
    where = "Redis" if args.redis else "memory"
    print(f"gateway CPU µs/req, through it minus direct to the same stub; responses stored in {where}")
    print(f"{'mode':7} {'chat':>8} {'bridged':>8} {'native':>8} {'÷chat':>6} {'÷bridged':>9}")
    failed = False
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        for mode, (chat_body, responses_body) in PAIRS.items():
            bridged_body = responses_body.replace(b'"gpt"', b'"m"', 1)  # the chat deployment, bridged
            targets = {
                "chat": (gateway + "/chat/completions", chat_body, direct + "/chat/completions", chat_body),
                "bridged": (gateway + "/responses", bridged_body, direct + "/chat/completions", chat_body),
                "native": (gateway + "/responses", responses_body, direct + "/responses", responses_body),
            }
            for url, body, floor_url, floor_body in targets.values():  # warm every path up
                await drive(url, body, args.requests // 4, args.concurrency, session)
                await drive(floor_url, floor_body, args.requests // 4, args.concurrency, session)
            costs: dict[str, list[float]] = {name: [] for name in targets}
            for _ in range(args.rounds):  # alternated, so that a noisy stretch hits every target
                for name, (url, body, floor_url, floor_body) in targets.items():
                    floor = await measure(
                        lambda u=floor_url, b=floor_body: drive(u, b, args.requests, args.concurrency, session), None
                    )
                    through = await measure(
                        lambda u=url, b=body: drive(u, b, args.requests, args.concurrency, session), None
                    )
                    costs[name].append((through - floor) / args.requests * 1e6)
            chat, bridged, native_cost = (statistics.median(costs[name]) for name in ("chat", "bridged", "native"))
            ratio = native_cost / chat
            failed |= ratio > BOUND
            verdict = "PASS" if ratio <= BOUND else "FAIL"
            print(
                f"{mode:7} {chat:8.1f} {bridged:8.1f} {native_cost:8.1f} {ratio:6.2f} {native_cost / bridged:9.2f}"
                f"  {verdict} (bound {BOUND} against chat)"
            )
    await runner.cleanup()
    stub.close()
    return not failed
