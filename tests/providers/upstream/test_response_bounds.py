"""What an upstream sends back is bounded, after decompression: a whole answer by the deployment's
`provider.max_response_bytes` (502 `upstream_response_too_large`), a stream's line or event by its
`provider.max_event_bytes` (502 `upstream_event_too_large`, or an error frame once the stream has
started). Real gzip bombs and oversized bodies from a loopback upstream, for every HTTP provider type;
the caps are shown to hold by bodies ten times (and more) their size, never by timing."""

from __future__ import annotations

import asyncio
import functools
import tracemalloc
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson
import pytest
from aiohttp import ClientSession, web
from aiohttp.test_utils import TestServer
from pytest_aiohttp import AiohttpServer

from gateway.config.loader import ConfigError, parse_config
from providers.options import DEFAULT_MAX_RESPONSE_BYTES
from providers.registry import PROVIDER_TYPES
from providers.upstream.sse import DEFAULT_MAX_EVENT_BYTES
from tests.conftest import GatewayFactory

MiB = 1024 * 1024
KEY = "sk-test-bounds-0123456789abcdef"
TYPES = ["openai", "azure", "openai-chat", "anthropic", "gemini"]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class Upstream:
    """Any path, any provider's API: answers with whatever `handler` the test sets."""

    base_url: str = ""
    handler: Handler | None = None
    sent: int = 0  # bytes a streamed body got out before the gateway hung up
    cut_off: bool = False  # the gateway hung up before the body was whole

    async def handle(self, request: web.Request) -> web.StreamResponse:
        await request.read()
        assert self.handler is not None
        return await self.handler(request)


@pytest.fixture
async def upstream(aiohttp_server: AiohttpServer) -> Upstream:
    fake = Upstream()
    app = web.Application()
    app.router.add_route("POST", "/{tail:.*}", fake.handle)
    server = await aiohttp_server(app)
    fake.base_url = str(server.make_url("")).rstrip("/")
    return fake


def provider_block(kind: str, base_url: str, **limits: int) -> dict[str, Any]:
    credential = {"api_key": "${PROVIDER_KEY}", **limits}
    if kind == "openai":
        return {"type": kind, "base_url": base_url + "/v1", **credential}
    if kind == "azure":
        return {"type": kind, "endpoint": base_url, "azure_deployment": "east", **credential}
    if kind == "openai-chat":
        return {"type": kind, "base_url": base_url + "/v1", "model": "chat", **credential}
    return {"type": kind, "base_url": base_url, "model": f"{kind}-model", **credential}


async def start(make_gateway: GatewayFactory, kind: str, upstream: Upstream, **limits: int) -> TestServer:
    deployment = {"name": "bounded", "provider": provider_block(kind, upstream.base_url, **limits), "retries": 0}
    return await make_gateway({"deployments": [deployment]}, {"PROVIDER_KEY": KEY})


async def call(http: ClientSession, gateway: TestServer, stream: bool = False) -> tuple[int, bytes]:
    body = {"model": "bounded", "prompt": "hi", "stream": stream}
    async with http.post(gateway.make_url("/v1/completions"), json=body) as response:
        return response.status, await response.read()


def error_of(raw: bytes) -> dict[str, Any]:
    error = orjson.loads(raw)["error"]
    assert isinstance(error, dict)
    return error


def assert_names_the_cap(raw: bytes, code: str, option: str) -> None:
    """The 502 names its code, the deployment ('bounded'), the 1 MiB cap and the option that sets it."""
    error = error_of(raw)
    assert error["code"] == code
    assert "'bounded'" in error["message"]
    assert "1 MiB (1048576 bytes)" in error["message"]
    assert option in error["message"]


# --- Bodies ---------------------------------------------------------------------------------------


@functools.cache
def gzip_of(head: bytes, filler_size: int, tail: bytes = b"") -> bytes:
    """gzip of `head`, `filler_size` bytes of `a`, `tail`: a bomb, a thousand times smaller than it inflates."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    pieces = [compressor.compress(head)]
    block = b"a" * MiB
    for _ in range(filler_size // MiB):
        pieces.append(compressor.compress(block))
    pieces.append(compressor.compress(b"a" * (filler_size % MiB) + tail))
    pieces.append(compressor.flush())
    return b"".join(pieces)


def json_bomb(inflated: int) -> bytes:
    return gzip_of(b'{"id": "cmpl-1", "object": "text_completion", "choices": [{"text": "', inflated, b'"}]}')


def sse_bomb(inflated: int, first: bytes = b"") -> bytes:
    """An event stream whose one event never ends before `inflated` bytes (after `first`, whole events)."""
    return gzip_of(first + b'data: {"choices": [{"text": "', inflated, b'"}]}\n\ndata: [DONE]\n\n')


def gzipped(body: bytes, content_type: str, status: int = 200) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        headers = {"Content-Encoding": "gzip", "Content-Type": content_type}
        return web.Response(body=body, status=status, headers=headers)

    return handler


def streamed(upstream: Upstream, total: int, content_type: str, head: bytes = b"", piece: int = 64 * 1024) -> Handler:
    """`total` bytes generated as they are sent (chunked, no Content-Length), counting what got out."""

    async def handler(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": content_type})
        await response.prepare(request)
        block = b"a" * piece
        finished = False
        try:
            await response.write(head)
            while upstream.sent < total:
                await response.write(block)
                upstream.sent += piece
            await response.write_eof()
            finished = True
        except ConnectionError:
            pass
        finally:  # a hang-up fails a write, or cancels the handler (as `gateway serve` does too)
            upstream.cut_off = not finished
        return response

    return handler


def sized(total: int) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(body=b"a" * total, content_type="application/json")

    return handler


# --- Whole answers --------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", TYPES)
async def test_a_gzip_bomb_answer_is_a_502_at_the_cap(
    http: ClientSession, make_gateway: GatewayFactory, upstream: Upstream, kind: str
) -> None:
    upstream.handler = gzipped(json_bomb(16 * MiB), "application/json")  # ~16 KB that inflate to 16 MiB
    gateway = await start(make_gateway, kind, upstream, max_response_bytes=MiB)

    status, raw = await call(http, gateway)

    assert status == 502
    assert_names_the_cap(raw, "upstream_response_too_large", "provider.max_response_bytes")


async def test_a_bomb_ten_times_the_default_cap_never_lies_in_memory_whole(
    http: ClientSession, make_gateway: GatewayFactory, upstream: Upstream
) -> None:
    """A few hundred KB inflating to 320 MiB, ten times the default cap: refused, and the process
    (gateway, upstream and client alike) never held more than a fraction of it."""
    inflated = 10 * DEFAULT_MAX_RESPONSE_BYTES
    upstream.handler = gzipped(json_bomb(inflated), "application/json")
    gateway = await start(make_gateway, "openai", upstream)
    tracemalloc.start()
    try:
        status, raw = await call(http, gateway)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert status == 502
    assert error_of(raw)["code"] == "upstream_response_too_large"
    assert "32 MiB" in error_of(raw)["message"]
    assert peak < 2 * DEFAULT_MAX_RESPONSE_BYTES  # about the cap (plus buffers), never the whole body


async def test_a_large_plain_body_is_cut_off_at_the_cap(
    http: ClientSession, make_gateway: GatewayFactory, upstream: Upstream
) -> None:
    """40 MB generated as it is sent, no Content-Length: the gateway stops reading past 4 MiB."""
    upstream.handler = streamed(upstream, 40 * 1000 * 1000, "application/json")
    gateway = await start(make_gateway, "openai", upstream, max_response_bytes=4 * MiB)

    status, raw = await call(http, gateway)

    assert status == 502
    error = error_of(raw)
    assert error["code"] == "upstream_response_too_large"
    assert "4 MiB" in error["message"]
    for _ in range(1500):  # the upstream notices the hang-up on its next write (30 s: a bound for a hang)
        if upstream.cut_off:
            break
        await asyncio.sleep(0.02)
    assert upstream.cut_off
    assert upstream.sent < 20 * 1000 * 1000  # the cap, plus what the sockets' buffers held


async def test_a_content_length_over_the_cap_is_refused_before_reading(
    http: ClientSession, make_gateway: GatewayFactory, upstream: Upstream
) -> None:
    upstream.handler = sized(8 * MiB)
    gateway = await start(make_gateway, "openai-chat", upstream, max_response_bytes=2 * MiB)

    status, raw = await call(http, gateway)

    assert status == 502
    assert error_of(raw)["code"] == "upstream_response_too_large"
    assert "2 MiB" in error_of(raw)["message"]


async def test_an_answer_under_the_cap_passes(
    http: ClientSession, make_gateway: GatewayFactory, upstream: Upstream
) -> None:
    text = "a" * (512 * 1024)
    body = {"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "m", "choices": [{"text": text}]}
    upstream.handler = gzipped(gzip_of(orjson.dumps(body), 0), "application/json")
    gateway = await start(make_gateway, "openai", upstream, max_response_bytes=MiB)

    status, raw = await call(http, gateway)

    assert status == 200
    assert orjson.loads(raw)["choices"][0]["text"] == text


async def test_a_gzip_bomb_error_body_is_read_only_in_part(
    http: ClientSession, make_gateway: GatewayFactory, upstream: Upstream
) -> None:
    upstream.handler = gzipped(json_bomb(64 * MiB), "application/json", status=500)
    gateway = await start(make_gateway, "openai", upstream)

    status, raw = await call(http, gateway)

    assert status == 502
    assert error_of(raw)["code"] == "upstream_http_error"


# --- Streams --------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", TYPES)
async def test_a_gzip_bomb_event_is_a_502_before_the_stream_starts(
    http: ClientSession, make_gateway: GatewayFactory, upstream: Upstream, kind: str
) -> None:
    upstream.handler = gzipped(sse_bomb(16 * MiB), "text/event-stream")
    gateway = await start(make_gateway, kind, upstream, max_event_bytes=MiB)

    status, raw = await call(http, gateway, stream=True)

    assert status == 502
    assert_names_the_cap(raw, "upstream_event_too_large", "provider.max_event_bytes")


async def test_a_gzip_bomb_event_mid_stream_ends_it_with_an_error_frame(
    http: ClientSession, make_gateway: GatewayFactory, upstream: Upstream
) -> None:
    first = b'data: {"id": "c", "object": "text_completion", "created": 1, "model": "m", "choices": [{"text": "hi", "index": 0}]}\n\n'  # noqa: E501
    upstream.handler = gzipped(sse_bomb(40 * MiB, first=first), "text/event-stream")
    gateway = await start(make_gateway, "openai", upstream)  # the default event cap: 4 MiB

    status, raw = await call(http, gateway, stream=True)

    assert status == 200
    frames = [frame for frame in raw.split(b"\n\n") if frame]
    assert orjson.loads(frames[0].removeprefix(b"data: "))["choices"][0]["text"] == "hi"
    error = error_of(frames[-1].removeprefix(b"data: "))
    assert error["code"] == "upstream_event_too_large"
    assert f"4 MiB ({DEFAULT_MAX_EVENT_BYTES} bytes)" in error["message"]
    assert b"[DONE]" not in raw


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_data_lines_without_a_blank_line_are_refused_past_the_cap(
    http: ClientSession, make_gateway: GatewayFactory, upstream: Upstream, kind: str
) -> None:
    lines = b'data: {"x": "' + b"a" * 1000 + b'"}\n'
    body = gzip_of(b"", 0, lines * 4000)  # 4 MB of data lines, one event never ended
    upstream.handler = gzipped(body, "text/event-stream")
    gateway = await start(make_gateway, kind, upstream, max_event_bytes=256 * 1024)

    status, raw = await call(http, gateway, stream=True)

    assert status == 502
    assert error_of(raw)["code"] == "upstream_event_too_large"
    assert "256 KiB" in error_of(raw)["message"]


async def test_a_long_plain_line_is_cut_off_at_the_event_cap(
    http: ClientSession, make_gateway: GatewayFactory, upstream: Upstream
) -> None:
    upstream.handler = streamed(upstream, 40 * 1000 * 1000, "text/event-stream", head=b'data: {"x": "')
    gateway = await start(make_gateway, "gemini", upstream, max_event_bytes=MiB)

    status, raw = await call(http, gateway, stream=True)

    assert status == 502
    assert error_of(raw)["code"] == "upstream_event_too_large"
    for _ in range(1500):  # 30 s at least: a bound for a hang, not a speed
        if upstream.cut_off:
            break
        await asyncio.sleep(0.02)
    assert upstream.cut_off
    assert upstream.sent < 20 * 1000 * 1000


async def test_what_follows_the_end_of_a_stream_is_not_read_whole(
    http: ClientSession, make_gateway: GatewayFactory, upstream: Upstream
) -> None:
    """After `[DONE]` the gateway reads on only to reuse the connection: not 40 MB of anything."""
    event = b'data: {"id": "c", "object": "text_completion", "created": 1, "model": "m", "choices": [{"text": "hi", "index": 0}]}\n\n'  # noqa: E501
    upstream.handler = streamed(upstream, 40 * 1000 * 1000, "text/event-stream", head=event + b"data: [DONE]\n\n")
    gateway = await start(make_gateway, "openai", upstream)

    status, raw = await call(http, gateway, stream=True)

    assert status == 200
    assert raw.endswith(b"data: [DONE]\n\n")
    for _ in range(1500):  # 30 s at least: a bound for a hang, not a speed
        if upstream.cut_off:
            break
        await asyncio.sleep(0.02)
    assert upstream.cut_off
    assert upstream.sent < 20 * 1000 * 1000


# --- Configuration --------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", TYPES)
def test_the_caps_are_per_deployment_options_with_defaults(kind: str) -> None:
    def load(**limits: int) -> Any:
        deployment = {"name": "d", "provider": provider_block(kind, "http://127.0.0.1:1", **limits)}
        text = orjson.dumps({"deployments": [deployment]}).decode()
        return parse_config(text, {"PROVIDER_KEY": KEY}, source="test.yaml")

    load()
    load(max_response_bytes=MiB, max_event_bytes=64 * 1024)
    with pytest.raises(ConfigError):
        load(max_event_bytes=10)
    fields = PROVIDER_TYPES[kind].options.model_fields
    assert fields["max_event_bytes"].default == 4 * MiB
    assert fields["max_response_bytes"].default == 32 * MiB
