"""Config reloads: by request header (rate limited), by SIGHUP, by the file watcher; a bad file is
rejected and the old config keeps serving; requests in flight finish on the config they began with."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from pathlib import Path
from typing import Any

import openai
import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer
from pytest_aiohttp import AiohttpServer

from gateway import app as gateway_app
from gateway.config.loader import LoadedConfig, load_config
from tests.conftest import deployment
from tests.support import fake_upstream as fake
from tests.support.fake_clock import FakeClock
from tests.support.fake_upstream import FakeUpstream
from tests.support.routing_helpers import (
    Upstreams,
    completion,
    eventually,
    make_timing,
    post,
    sdk,
    serving,
    start_gateway_from_file,
    write_config,
    write_text,
)
from tests.support.stream_helpers import Gate

REFRESH = {"x-gateway-refresh-config": "true"}


@pytest.fixture
def upstreams(aiohttp_server: AiohttpServer) -> Upstreams:
    return Upstreams(aiohttp_server)


@pytest.fixture
async def pair(upstreams: Upstreams) -> tuple[FakeUpstream, FakeUpstream]:
    a, b = await upstreams.start_many("a", "b")
    return a, b


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "gateway.yaml"


def versioned(upstreams: dict[str, FakeUpstream], **reload: Any) -> dict[str, Any]:
    """One deployment per upstream, named after it."""
    return {
        "deployments": [deployment(name, u.base_url, retries=0, timeout_s=30) for name, u in upstreams.items()],
        "routing": {"reload": {"watch": False, **reload}},
    }


async def status_of(http: ClientSession, gateway: TestServer, model: str, headers: dict[str, str] | None = None) -> int:
    status, _, _ = await post(http, gateway, completion(model), headers)
    return status


@pytest.mark.parametrize("header", [REFRESH, {"x-enkrypt-refresh-cache": "true"}, {"X-Gateway-Refresh-Config": "True"}])
async def test_refresh_header_reloads_before_routing_the_request(
    http: ClientSession,
    aiohttp_server: AiohttpServer,
    pair: tuple[FakeUpstream, FakeUpstream],
    path: Path,
    header: dict[str, str],
) -> None:
    a, b = pair
    write_config(path, versioned({"a": a}))
    gateway = await start_gateway_from_file(aiohttp_server, path)
    assert await status_of(http, gateway, "b") == 404

    write_config(path, versioned({"a": a, "b": b}))
    without_header = await status_of(http, gateway, "b")
    status, body, headers = await post(http, gateway, completion("b", "new"), header)

    assert without_header == 404  # nothing reloads on its own with the watcher off
    assert status == 200
    assert headers["x-gateway-deployment"] == "b"
    assert body["choices"][0]["text"] == "echo: new"
    assert len(b.received) == 1
    assert serving(gateway).reloads == 1


async def test_refresh_headers_reload_at_most_once_per_interval(
    http: ClientSession, aiohttp_server: AiohttpServer, upstreams: Upstreams, path: Path
) -> None:
    a, b, c = await upstreams.start_many("a", "b", "c")
    clock = FakeClock()
    write_config(path, versioned({"a": a}))
    gateway = await start_gateway_from_file(aiohttp_server, path, timing=make_timing(clock=clock))

    write_config(path, versioned({"a": a, "b": b}))
    first = await status_of(http, gateway, "b", REFRESH)
    write_config(path, versioned({"a": a, "b": b, "c": c}))
    clock.advance(0.9)
    second = await status_of(http, gateway, "c", REFRESH)  # within 1 s of the first: not reloaded
    reloads_after_second = serving(gateway).reloads
    clock.advance(0.1)
    third = await status_of(http, gateway, "c", REFRESH)

    assert (first, second, third) == (200, 404, 200)
    assert reloads_after_second == 1
    assert serving(gateway).reloads == 2


async def test_refresh_under_a_burst_reloads_once(
    http: ClientSession, aiohttp_server: AiohttpServer, pair: tuple[FakeUpstream, FakeUpstream], path: Path
) -> None:
    a, b = pair
    write_config(path, versioned({"a": a}))
    gateway = await start_gateway_from_file(aiohttp_server, path)  # the real clock
    write_config(path, versioned({"a": a, "b": b}))

    statuses = await asyncio.gather(*[status_of(http, gateway, "a", REFRESH) for _ in range(20)])

    assert statuses == [200] * 20
    assert serving(gateway).reloads == 1


@pytest.mark.parametrize(
    "broken",
    [
        pytest.param("deployments: [\n  {name: a", id="yaml-syntax"),
        pytest.param("deployments: []\nrouting: {retires: 3}\n", id="unknown-setting"),
        pytest.param("deployments:\n  - {name: a, provider: {type: openai, base_url: 'x'}}\n", id="bad-url"),
    ],
)
async def test_a_broken_file_is_rejected_and_the_old_config_keeps_serving(
    http: ClientSession,
    aiohttp_server: AiohttpServer,
    pair: tuple[FakeUpstream, FakeUpstream],
    path: Path,
    caplog: pytest.LogCaptureFixture,
    broken: str,
) -> None:
    a, _ = pair
    write_config(path, versioned({"a": a}))
    gateway = await start_gateway_from_file(aiohttp_server, path)
    write_text(path, broken)

    with caplog.at_level(logging.ERROR, logger="gateway.pipeline.serving"):
        status, body, headers = await post(http, gateway, completion("a", "still here"), REFRESH)

    assert status == 200
    assert body["choices"][0]["text"] == "echo: still here"
    assert headers["x-gateway-deployment"] == "a"
    assert serving(gateway).reloads == 0
    errors = [r for r in caplog.records if r.levelno == logging.ERROR and r.name == "gateway.pipeline.serving"]
    assert len(errors) == 1
    assert "rejected" in errors[0].getMessage()
    assert str(path) in errors[0].getMessage()


async def test_a_reload_applies_new_keys(
    http: ClientSession,
    aiohttp_server: AiohttpServer,
    pair: tuple[FakeUpstream, FakeUpstream],
    path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a, _ = pair
    monkeypatch.setenv("ROUTING_RELOAD_TEST_KEY", "reload-key-123456")
    write_config(path, versioned({"a": a}))
    gateway = await start_gateway_from_file(aiohttp_server, path)
    assert await status_of(http, gateway, "a") == 200  # open: no keys yet

    secured = versioned({"a": a})
    secured["keys"] = [{"name": "ops", "key": "${ROUTING_RELOAD_TEST_KEY}"}]
    write_config(path, secured)
    refused = await status_of(http, gateway, "a", REFRESH)
    allowed = await status_of(http, gateway, "a", {"Authorization": "Bearer reload-key-123456"})

    assert (refused, allowed) == (401, 200)


async def test_a_reload_says_which_changed_sections_wait_for_a_restart(
    http: ClientSession,
    aiohttp_server: AiohttpServer,
    pair: tuple[FakeUpstream, FakeUpstream],
    path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    a, _ = pair
    write_config(path, versioned({"a": a}))
    gateway = await start_gateway_from_file(aiohttp_server, path)
    resized = versioned({"a": a})
    resized["cache"] = {"memory_max_bytes": 1024}
    write_config(path, resized)

    with caplog.at_level(logging.WARNING, logger="gateway.pipeline.serving"):
        status, _, _ = await post(http, gateway, completion("a", "hi"), REFRESH)

    assert (status, serving(gateway).reloads) == (200, 1)
    assert "changes to the 'cache' section take effect after a restart" in caplog.text


async def test_the_file_watcher_picks_up_a_change(
    http: ClientSession, aiohttp_server: AiohttpServer, pair: tuple[FakeUpstream, FakeUpstream], path: Path
) -> None:
    a, b = pair
    write_config(path, versioned({"a": a}, watch=True, poll_interval_s=0.1))
    gateway = await start_gateway_from_file(aiohttp_server, path)
    assert await status_of(http, gateway, "b") == 404

    write_config(path, versioned({"a": a, "b": b}, watch=True, poll_interval_s=0.1))
    await eventually(lambda: serving(gateway).reloads)

    assert await status_of(http, gateway, "b") == 200
    assert serving(gateway).reloads == 1


async def test_the_file_watcher_survives_a_broken_file(
    http: ClientSession,
    aiohttp_server: AiohttpServer,
    pair: tuple[FakeUpstream, FakeUpstream],
    path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    a, b = pair
    write_config(path, versioned({"a": a}, watch=True, poll_interval_s=0.1))
    gateway = await start_gateway_from_file(aiohttp_server, path)

    with caplog.at_level(logging.ERROR, logger="gateway.pipeline.serving"):
        write_text(path, "deployments: [oops")
        await eventually(lambda: "rejected" in caplog.text)
    still_serving = await status_of(http, gateway, "a")
    write_config(path, versioned({"a": a, "b": b}, watch=True, poll_interval_s=0.1))
    await eventually(lambda: serving(gateway).reloads)

    assert still_serving == 200
    assert await status_of(http, gateway, "b") == 200


async def test_sighup_reloads(
    http: ClientSession, aiohttp_server: AiohttpServer, pair: tuple[FakeUpstream, FakeUpstream], path: Path
) -> None:
    a, b = pair
    write_config(path, versioned({"a": a}))
    gateway = await start_gateway_from_file(aiohttp_server, path)
    # The gateway listens for SIGHUP (pytest runs this loop in the main thread); without a handler
    # the signal would end the test process, so check before sending it.
    assert signal.getsignal(signal.SIGHUP) not in (signal.SIG_DFL, signal.SIG_IGN, None)
    write_config(path, versioned({"a": a, "b": b}))

    os.kill(os.getpid(), signal.SIGHUP)
    await eventually(lambda: serving(gateway).reloads)

    assert await status_of(http, gateway, "b") == 200
    assert serving(gateway).reloads == 1


async def test_reloads_under_concurrent_load_lose_no_request(
    aiohttp_server: AiohttpServer, pair: tuple[FakeUpstream, FakeUpstream], path: Path
) -> None:
    old, new = pair

    def config_for(upstream: FakeUpstream, model: str) -> dict[str, Any]:
        main = deployment("main", upstream.base_url, retries=0, timeout_s=5, provider={"model": model})
        return {"deployments": [main], "routing": {"reload": {"watch": False, "header_min_interval_s": 0}}}

    write_config(path, config_for(old, "up-old"))
    gateway = await start_gateway_from_file(aiohttp_server, path)
    words = [f"w{index} " for index in range(8)]
    old.script(*[fake.stream(words, delay_s=0.05, upstream=old) for _ in range(10)])

    async with sdk(gateway) as client:

        async def read_stream() -> tuple[str, set[str]]:
            stream = await client.completions.create(model="main", prompt="s", stream=True)
            chunks = [chunk async for chunk in stream]
            return "".join(c.choices[0].text for c in chunks if c.choices), {c.model for c in chunks}

        async def complete(index: int, refresh: bool) -> str:
            extra = REFRESH if refresh else {}
            answer = await client.completions.create(model="main", prompt=f"c{index}", extra_headers=extra)
            assert answer.choices[0].text == f"echo: c{index}"
            return answer.model

        streams = [asyncio.create_task(read_stream()) for _ in range(10)]
        await eventually(lambda: len(old.received) == 10)  # every stream is open on the old upstream
        models: list[str] = []
        for round_ in range(4):
            target = (new, "up-new") if round_ % 2 == 0 else (old, "up-old")
            write_config(path, config_for(*target))
            models += await asyncio.gather(*[complete(round_ * 10 + i, refresh=i == 0) for i in range(10)])
        streamed = await asyncio.gather(*streams)

    assert len(models) == 40
    assert set(models) <= {"up-old", "up-new"}
    assert models[:10].count("up-new") >= 1  # the first reload took effect
    assert streamed == [("".join(words), {"up-old"})] * 10  # finished on the upstream they began with
    assert old.streams_closed_early == 0
    assert serving(gateway).reloads == 4
    assert len(new.received) >= 1


async def test_a_request_in_flight_during_a_reload_finishes_on_its_config(
    http: ClientSession, aiohttp_server: AiohttpServer, pair: tuple[FakeUpstream, FakeUpstream], path: Path
) -> None:
    old, new = pair
    write_config(
        path, {"deployments": [deployment("main", old.base_url, timeout_s=30)], "routing": {"reload": {"watch": False}}}
    )
    gateway = await start_gateway_from_file(aiohttp_server, path)
    gate = Gate()  # the old upstream answers only once the reload is done: in flight across it on any machine
    old.script(gate.answer(old))

    slow = asyncio.create_task(post(http, gateway, completion("main", "slow")))
    await eventually(lambda: old.received)
    write_config(
        path, {"deployments": [deployment("main", new.base_url, timeout_s=30)], "routing": {"reload": {"watch": False}}}
    )
    fresh_status, _, _ = await post(http, gateway, completion("main", "fresh"), REFRESH)
    assert not slow.done()
    gate.release.set()
    status, body, _ = await slow

    assert fresh_status == 200
    assert [r.body["prompt"] for r in new.received] == ["fresh"]
    assert status == 200
    assert body["choices"][0]["text"] == "echo: slow"
    assert [r.body["prompt"] for r in old.received] == ["slow"]


async def test_the_sdk_sees_no_error_across_a_reload(
    aiohttp_server: AiohttpServer, pair: tuple[FakeUpstream, FakeUpstream], path: Path
) -> None:
    a, b = pair
    write_config(path, versioned({"a": a}))
    gateway = await start_gateway_from_file(aiohttp_server, path)
    write_config(path, versioned({"b": b}))  # a is gone, b is new

    async with sdk(gateway) as client:
        before = await client.completions.create(model="a", prompt="x")
        after = await client.completions.create(model="b", prompt="y", extra_headers=REFRESH)
        with pytest.raises(openai.NotFoundError):
            await client.completions.create(model="a", prompt="z")

    assert before.choices[0].text == "echo: x"
    assert after.choices[0].text == "echo: y"


def keyed(upstreams: dict[str, FakeUpstream]) -> dict[str, Any]:
    """`versioned`, with one API key (and an admin key, whose value is not an API key)."""
    config = versioned(upstreams)
    config["keys"] = [{"name": "ops", "key": "${ROUTING_RELOAD_TEST_KEY}"}]
    config["admin"] = {"key": "${ROUTING_RELOAD_ADMIN_KEY}"}
    return config


@pytest.mark.parametrize(
    "credentials",
    [{}, {"Authorization": "Bearer not-a-key-0123456789"}, {"Authorization": "Bearer admin-key-0123456789"}],
    ids=["no-key", "wrong-key", "admin-key"],
)
async def test_only_an_authenticated_refresh_reloads(
    http: ClientSession,
    aiohttp_server: AiohttpServer,
    pair: tuple[FakeUpstream, FakeUpstream],
    path: Path,
    monkeypatch: pytest.MonkeyPatch,
    credentials: dict[str, str],
) -> None:
    a, b = pair
    monkeypatch.setenv("ROUTING_RELOAD_TEST_KEY", "reload-key-123456")
    monkeypatch.setenv("ROUTING_RELOAD_ADMIN_KEY", "admin-key-0123456789")
    key = {"Authorization": "Bearer reload-key-123456"}
    write_config(path, keyed({"a": a}))
    gateway = await start_gateway_from_file(aiohttp_server, path)
    write_config(path, keyed({"a": a, "b": b}))  # changed on disk; the watcher is off

    refused = await status_of(http, gateway, "b", {**REFRESH, **credentials})
    reloads_after_refused = serving(gateway).reloads
    unchanged = await status_of(http, gateway, "b", key)  # a known key, but no refresh header
    refreshed = await status_of(http, gateway, "b", {**REFRESH, **key})

    assert refused == 401
    assert reloads_after_refused == 0  # the file on disk was not read
    assert unchanged == 404
    assert refreshed == 200
    assert serving(gateway).reloads == 1


async def test_a_reload_reads_and_parses_the_file_off_the_event_loop(
    http: ClientSession,
    aiohttp_server: AiohttpServer,
    pair: tuple[FakeUpstream, FakeUpstream],
    path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a, b = pair
    on_loop: list[bool] = []

    def load(source: str | Path) -> LoadedConfig:
        try:
            asyncio.get_running_loop()
            on_loop.append(True)
        except RuntimeError:  # no loop in this thread
            on_loop.append(False)
        return load_config(source)

    monkeypatch.setattr(gateway_app, "load_config", load)
    write_config(path, versioned({"a": a}))
    gateway = await start_gateway_from_file(aiohttp_server, path)
    write_config(path, versioned({"a": a, "b": b}))

    assert await status_of(http, gateway, "b", REFRESH) == 200
    assert on_loop == [False]
