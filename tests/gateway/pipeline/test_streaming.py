"""SSE relay: exact framing, chunk-by-chunk delivery, failures after the start, and disconnects."""

from __future__ import annotations

import asyncio
from typing import Any

import openai
import orjson
import pytest
from aiohttp import ClientSession, web
from aiohttp.test_utils import TestServer

from tests.conftest import GatewayFactory, deployment
from tests.support import fake_upstream as fake
from tests.support.fake_upstream import FakeUpstream

STREAM_BODY = {"model": "fake", "prompt": "one two three", "stream": True}


async def read_stream(http: ClientSession, gateway: TestServer, body: dict[str, Any] | None = None) -> bytes:
    async with http.post(gateway.make_url("/v1/completions"), json=body or STREAM_BODY) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/event-stream")
        return await response.read()


def events(raw: bytes) -> list[bytes]:
    assert raw.endswith(b"\n\n")
    frames = raw[:-2].split(b"\n\n")
    assert all(frame.startswith(b"data: ") for frame in frames)
    return [frame[len(b"data: ") :] for frame in frames]


async def test_frames_are_exactly_data_lines_ending_with_done(
    http: ClientSession, gateway: TestServer, upstream: FakeUpstream
) -> None:
    # The upstream uses CRLF, a comment, an event field and two-line data: all normalised.
    first = fake.chunk({"model": "fake"}, "Hello")
    upstream.script(
        fake.raw_sse(
            b": keep-alive\r\n\r\nevent: completion\r\ndata: " + first + b"\r\n\r\n"
            b'data: {"id": "x", "object": "text_completion",\r\ndata: "choices": []}\r\n\r\ndata: [DONE]\r\n\r\n'
        )
    )

    raw = await read_stream(http, gateway)

    assert (
        raw
        == b"data: " + first + b'\n\ndata: {"id": "x", "object": "text_completion",\n"choices": []}\n\ndata: [DONE]\n\n'
    )


async def test_sdk_stream_with_usage_when_asked(client: openai.AsyncOpenAI) -> None:
    stream = await client.completions.create(
        model="fake", prompt="a b", stream=True, stream_options={"include_usage": True}
    )
    chunks = [chunk async for chunk in stream]

    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 3  # "echo:", "a", "b"
    assert chunks[-2].choices[0].finish_reason == "stop"


async def test_stream_options_are_forwarded(client: openai.AsyncOpenAI, upstream: FakeUpstream) -> None:
    stream = await client.completions.create(
        model="fake", prompt="x", stream=True, stream_options={"include_usage": True}
    )
    [_ async for _ in stream]

    assert upstream.received[0].body["stream_options"] == {"include_usage": True}
    assert upstream.received[0].body["stream"] is True


@pytest.mark.parametrize(
    ("behaviour", "code"),
    [
        pytest.param(
            fake.raw_sse(b"data: " + fake.chunk({}, "a") + b"\n\n", b"data: {not json\n\n"),
            "upstream_malformed",
            id="bad-json-event",
        ),
        pytest.param(
            fake.raw_sse(b"data: " + fake.chunk({}, "a") + b"\n\n", b"data: [1, 2]\n\n"),
            "upstream_malformed",
            id="event-not-object",
        ),
        pytest.param(fake.stream(["a ", "b "], done=False), "upstream_truncated", id="no-done"),
        pytest.param(fake.stream_then_drop(["a ", "b "]), "upstream_unreachable", id="dropped-mid-stream"),
    ],
)
async def test_failure_after_start_ends_with_an_error_frame(
    http: ClientSession, gateway: TestServer, upstream: FakeUpstream, behaviour: fake.Behaviour, code: str
) -> None:
    upstream.script(behaviour)

    frames = events(await read_stream(http, gateway))

    error = orjson.loads(frames[-1])["error"]
    assert error["code"] == code
    assert "fake" in error["message"]
    assert b"[DONE]" not in frames  # a failed stream never looks complete


async def test_sdk_raises_on_a_failed_stream(client: openai.AsyncOpenAI, upstream: FakeUpstream) -> None:
    upstream.script(fake.stream(["a ", "b "], done=False))
    stream = await client.completions.create(model="fake", prompt="x", stream=True)

    with pytest.raises(openai.APIError, match="without \\[DONE\\]"):
        [_ async for _ in stream]


async def test_stall_mid_stream_times_out_with_an_error_frame(
    http: ClientSession, make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    # 2 s: the first word must come within it, so it leaves a loaded machine room; the stall after it
    # outlasts it many times over (the gateway cuts it).
    gateway = await make_gateway({"deployments": [deployment("fake", upstream.base_url, timeout_s=2)]})
    upstream.script(fake.stream(["a ", "b "], delay_s=120.0))

    frames = events(await read_stream(http, gateway))

    assert orjson.loads(frames[0])["choices"][0]["text"] == "a "
    assert orjson.loads(frames[-1])["error"]["code"] == "upstream_timeout"


@pytest.mark.parametrize(("upstream_status", "status"), [(429, 429), (400, 400), (500, 502)])
async def test_failure_before_the_first_byte_keeps_its_http_status(
    http: ClientSession, gateway: TestServer, upstream: FakeUpstream, upstream_status: int, status: int
) -> None:
    upstream.script(fake.status(upstream_status))

    async with http.post(gateway.make_url("/v1/completions"), json=STREAM_BODY) as response:
        body = await response.json()

    assert response.status == status
    assert "error" in body


async def test_json_answer_to_a_stream_request_is_a_502(
    http: ClientSession, gateway: TestServer, upstream: FakeUpstream
) -> None:
    async def json_anyway(request: Any, body: dict[str, Any]) -> Any:
        return await fake.answer()(request, {**body, "stream": False})

    upstream.script(json_anyway)

    async with http.post(gateway.make_url("/v1/completions"), json=STREAM_BODY) as response:
        body = await response.json()

    assert response.status == 502
    assert "event stream" in body["error"]["message"]


async def test_chunks_arrive_as_the_upstream_sends_them(
    http: ClientSession, gateway: TestServer, upstream: FakeUpstream
) -> None:
    read = asyncio.Event()  # set by the client on each read

    async def lock_step(request: web.Request, body: dict[str, Any]) -> web.StreamResponse:
        """Each word, then nothing more until the client has read something: a gateway that held a
        word back for the rest would never deliver it (seen, not timed)."""
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for i in range(5):
            await response.write(b"data: " + fake.chunk(body, f"w{i} ") + b"\n\n")
            await read.wait()
            read.clear()
        await response.write(b"data: " + fake.chunk(body, "", "stop") + b"\n\ndata: [DONE]\n\n")
        return response

    upstream.script(lock_step)
    reads = []

    async with asyncio.timeout(10):  # a hang guard: each read takes milliseconds, a held-back word forever
        async with http.post(gateway.make_url("/v1/completions"), json=STREAM_BODY) as response:
            async for data in response.content.iter_any():
                reads.append(data)
                read.set()

    assert b"w0 " in reads[0]  # the first word is not held back for the rest
    assert len(reads) >= 5
    assert b"[DONE]" in reads[-1]


async def test_client_disconnect_closes_the_upstream_request(
    http: ClientSession, make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    gateway = await make_gateway({"deployments": [deployment("fake", upstream.base_url, timeout_s=30)]})
    upstream.script(fake.stream([f"w{i} " for i in range(100)], delay_s=0.1, upstream=upstream))

    async with http.post(gateway.make_url("/v1/completions"), json=STREAM_BODY) as response:
        await response.content.readany()
        response.close()  # the client goes away mid-stream

    await asyncio.wait_for(upstream.closed_early.wait(), timeout=30)  # a stream left alone ends without it
    assert upstream.streams_closed_early == 1


async def test_client_disconnect_while_upstream_is_silent_closes_it(
    http: ClientSession, make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    gateway = await make_gateway({"deployments": [deployment("fake", upstream.base_url, timeout_s=30)]})
    upstream.script(fake.stream(["first ", "second "], delay_s=120.0, upstream=upstream))

    async with http.post(gateway.make_url("/v1/completions"), json=STREAM_BODY) as response:
        await response.content.readany()
        response.close()  # the upstream is mid-pause: nothing to write, still the call must end

    await asyncio.wait_for(upstream.closed_early.wait(), timeout=30)  # a bound for a hang, not a speed


async def test_gateway_keeps_serving_after_a_disconnect(
    client: openai.AsyncOpenAI, http: ClientSession, gateway: TestServer, upstream: FakeUpstream
) -> None:
    upstream.script(fake.stream([f"w{i} " for i in range(50)], delay_s=0.05, upstream=upstream))
    async with http.post(gateway.make_url("/v1/completions"), json=STREAM_BODY) as response:
        await response.content.readany()
        response.close()

    completion = await client.completions.create(model="fake", prompt="again")

    assert completion.choices[0].text == "echo: again"


async def test_client_disconnect_cancels_a_plain_request_upstream(
    http: ClientSession, make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    gateway = await make_gateway({"deployments": [deployment("fake", upstream.base_url, timeout_s=30)]})
    arrived, cancelled = asyncio.Event(), asyncio.Event()

    async def slow(request: Any, body: dict[str, Any]) -> Any:
        arrived.set()
        try:
            await asyncio.sleep(120)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return await fake.answer()(request, body)

    upstream.script(slow)
    request = asyncio.ensure_future(
        http.post(gateway.make_url("/v1/completions"), json={"model": "fake", "prompt": "x"})
    )
    await asyncio.wait_for(arrived.wait(), timeout=30)
    request.cancel()  # the client gives up

    await asyncio.wait_for(cancelled.wait(), timeout=30)  # a bound for a hang: left alone, it sleeps 120 s
