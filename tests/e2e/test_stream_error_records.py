"""A stream that ends with an error event after its 200 (its upstream died, the gateway shut down)
is recorded as what the client got: status 200 with the error's code in the access log, an error
span naming the code, and `gateway_request_errors_total{mid_stream="true"}` (the request stays a
2xx in `gateway_requests_total`: that is the status sent), counted as an error by the dashboard."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer
from pytest_aiohttp import AiohttpServer

from gateway.http.app_keys import SERVING
from tests.conftest import GatewayFactory, deployment, upstream_url
from tests.support.fake_upstream import FakeUpstream, stream, stream_then_drop
from tests.support.observability_helpers import log_lines, scrape, value
from tests.support.otlp_receiver import OtlpReceiver

SERVER = 2
ERROR = 2  # the OTLP status code of an error span


@pytest.fixture
async def receiver(aiohttp_server: AiohttpServer, monkeypatch: pytest.MonkeyPatch) -> OtlpReceiver:
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "20")  # export within milliseconds, not the SDK's 5 s
    found = OtlpReceiver()
    found.url = str((await aiohttp_server(found.app())).make_url("")).rstrip("/")
    return found


def config(upstream: FakeUpstream, log: Path, receiver: OtlpReceiver) -> dict[str, Any]:
    return {
        "deployments": [deployment("fake", upstream_url(upstream), retries=0, timeout_s=30)],
        "observability": {
            "access_log": {"path": str(log)},
            "tracing": {"enabled": True, "endpoint": receiver.url},
        },
    }


async def first_event_then_rest(http: ClientSession, gateway: TestServer, started: asyncio.Event) -> bytes:
    body = {"model": "fake", "prompt": "hi", "stream": True}
    async with http.post(gateway.make_url("/v1/completions"), json=body) as response:
        assert response.status == 200
        first = await response.content.readuntil(b"\n\n")
        started.set()
        return first + await response.read()


def last_error(body: bytes) -> dict[str, Any]:
    last = body.rstrip(b"\n").rsplit(b"\n\n", 1)[-1]
    error: dict[str, Any] = orjson.loads(last.removeprefix(b"data: "))["error"]
    return error


async def assert_recorded_as(
    http: ClientSession, gateway: TestServer, log: Path, receiver: OtlpReceiver, code: str
) -> None:
    [line] = await log_lines(log, 1)
    assert (line["status"], line["error"], line["stream_error"]) == (200, code, True)
    assert line["deployment"] == "fake"

    metrics = await scrape(http, str(gateway.make_url("/metrics")))
    assert value(metrics, "gateway_requests_total", deployment="fake", status_class="2xx") == 1  # what was sent
    errors = value(metrics, "gateway_request_errors_total", deployment="fake", code=code, mid_stream="true")
    assert errors == 1
    async with http.get(gateway.make_url("/dashboard/data")) as response:
        [row] = [row for row in (await response.json())["deployments"] if row["name"] == "fake"]
    assert row["errors"] == 1

    spans = await receiver.wait_for(2)
    [server] = [span for span in spans if span.kind == SERVER]
    assert server.status_code == ERROR
    assert server.attributes["http.response.status_code"] == 200
    assert (server.attributes["gateway.error"], server.attributes["error.type"]) == (code, code)


async def test_a_stream_whose_upstream_dies_midway_is_recorded_as_an_error(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession, tmp_path: Path, receiver: OtlpReceiver
) -> None:
    log = tmp_path / "access.log"
    gateway = await make_gateway(config(upstream, log, receiver))
    upstream.script(stream_then_drop(["one ", "two "]))

    received = await first_event_then_rest(http, gateway, asyncio.Event())

    assert last_error(received)["code"] == "upstream_unreachable"
    await assert_recorded_as(http, gateway, log, receiver, "upstream_unreachable")


async def test_a_stream_cut_by_shutdown_is_recorded_as_an_error(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession, tmp_path: Path, receiver: OtlpReceiver
) -> None:
    log = tmp_path / "access.log"
    gateway = await make_gateway(config(upstream, log, receiver))
    upstream.script(stream([f"w{i} " for i in range(200)], delay_s=0.2))  # far longer than the test
    started = asyncio.Event()
    reading = asyncio.create_task(first_event_then_rest(http, gateway, started))
    await started.wait()

    await gateway.app[SERVING].drain(0)  # a grace of 0: the stream in flight is ended at once
    received = await reading

    assert last_error(received)["code"] == "shutting_down"
    await assert_recorded_as(http, gateway, log, receiver, "shutting_down")


async def test_a_stream_that_ends_well_is_no_error(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession, tmp_path: Path, receiver: OtlpReceiver
) -> None:
    log = tmp_path / "access.log"
    gateway = await make_gateway(config(upstream, log, receiver))
    upstream.script(stream(["one ", "two "]))

    received = await first_event_then_rest(http, gateway, asyncio.Event())

    assert received.endswith(b"data: [DONE]\n\n")
    [line] = await log_lines(log, 1)
    assert "error" not in line
    assert "stream_error" not in line
    metrics = await scrape(http, str(gateway.make_url("/metrics")))
    assert value(metrics, "gateway_request_errors_total") == 0
    [server] = [span for span in await receiver.wait_for(2) if span.kind == SERVER]
    assert server.status_code != ERROR
