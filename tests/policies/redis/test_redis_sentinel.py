"""The gateway on a real master, replica and three Sentinels (`redis.mode: sentinel`), started by the
test: the master is killed; until Sentinel promotes the replica, `limits.on_redis_error` decides
(open: served without limits, closed: 503 `limits_unavailable`) and nothing else fails; once it has,
the gateway follows the promotion and the limits hold again.

Sentinels with a password of their own (`requirepass`): the gateway and `gateway keys` reach the
master through them with `redis.sentinel_password`; a wrong or missing one is named, and the password
(a canary) appears in no response, log line, metric, error or printed config."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer

from gateway.config.loader import parse_config
from tests.conftest import GatewayFactory
from tests.e2e.test_secret_canaries import canary, leaks_in
from tests.gateway.keys.test_keys_cli import keys_command, problem_lines
from tests.policies.limits.test_limits_exact import ENV, OTHER, TEAM, UNAVAILABLE, codes, config, post
from tests.support.fake_upstream import FakeUpstream
from tests.support.redis_cluster_helpers import SentinelSetup, start_sentinels

FAILOVER_DEADLINE_S = 60.0  # down-after 1 s and a failover of a few seconds, on a loaded machine
SENTINEL_PASSWORD = canary("stl-")  # the Sentinels' own requirepass


@pytest.fixture
def sentinels() -> Iterator[SentinelSetup]:
    setup = start_sentinels()
    try:
        yield setup
    finally:
        setup.stop()


@pytest.fixture(scope="module")
def guarded_sentinels() -> Iterator[SentinelSetup]:
    """Sentinels that require SENTINEL_PASSWORD (the master needs none), shared by the tests that
    kill nothing."""
    setup = start_sentinels(password=SENTINEL_PASSWORD)
    try:
        yield setup
    finally:
        setup.stop()


def sentinel_block(setup: SentinelSetup, **credentials: str) -> dict[str, Any]:
    return {
        "mode": "sentinel",
        "sentinels": setup.addresses,
        "service_name": setup.service_name,
        "prefix": f"test:{uuid.uuid4().hex}:",
        **credentials,
    }


async def ready(http: ClientSession, gateway: TestServer) -> tuple[int, dict[str, Any]]:
    async with http.get(gateway.make_url("/ready")) as response:
        return response.status, await response.json()


@pytest.mark.parametrize("on_redis_error", ["open", "closed"])
async def test_the_gateway_follows_a_failover_and_on_redis_error_decides_meanwhile(
    sentinels: SentinelSetup,  # first: stopped after the gateway, which may still write to Redis as it stops
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    http: ClientSession,
    on_redis_error: str,
) -> None:
    redis: dict[str, Any] = {
        "mode": "sentinel",
        "sentinels": sentinels.addresses,
        "service_name": sentinels.service_name,
    }
    settings = config(
        upstream,
        {**redis, "prefix": f"test:{uuid.uuid4().hex}:"},
        team={"limits": {"rpm": 10_000}},
        other={"limits": {"rpm": 5}},
    )
    settings["limits"] = {"on_redis_error": on_redis_error}
    gateway = await make_gateway(settings, ENV)
    assert (await post(http, gateway, TEAM))[0] == 200
    assert (await ready(http, gateway))[1]["redis"] == "ok"
    old_master = sentinels.master_port()

    sentinels.master.kill()
    answers = [await post(http, gateway, TEAM)]  # Sentinel still names the dead master for 1 s at least
    deadline = time.monotonic() + FAILOVER_DEADLINE_S
    # Until /ready sees Redis again (with `open` it stays 200 throughout: only its body says so).
    while sentinels.master_port() == old_master or (await ready(http, gateway))[1]["redis"] != "ok":
        assert time.monotonic() < deadline, "no failover"
        answers.append(await post(http, gateway, TEAM))
        await asyncio.sleep(0.05)

    counted = codes(answers)
    if on_redis_error == "open":
        assert counted == {(200, None): len(answers)}  # served without limits meanwhile
    else:
        assert answers[0][:2] == (503, {"error": answers[0][1]["error"]})
        assert answers[0][1]["error"]["code"] == "limits_unavailable"
        assert set(counted) <= {(200, None), UNAVAILABLE}
    # The promoted replica holds the limits now: rpm 5 admits exactly 5 of 10.
    after = await asyncio.gather(*(post(http, gateway, OTHER) for _ in range(10)))
    assert codes(after) == {(200, None): 5, (429, "rate_limit_exceeded"): 5}
    status, body = await ready(http, gateway)
    assert (status, body["redis"]) == (200, "ok")


async def scrape(http: ClientSession, gateway: TestServer) -> str:
    async with http.get(gateway.make_url("/metrics")) as response:  # a loopback client needs no key
        assert response.status == 200
        return await response.text()


def write_config(tmp_path: Path, settings: dict[str, Any]) -> str:
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(settings))
    return str(path)


@pytest.mark.parametrize("user", [{}, {"sentinel_username": "default"}], ids=["password", "user-and-password"])
async def test_the_gateway_and_the_keys_cli_work_through_sentinels_that_require_a_password(
    guarded_sentinels: SentinelSetup,
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    http: ClientSession,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
    user: dict[str, str],
) -> None:
    caplog.set_level(logging.DEBUG)
    redis = sentinel_block(guarded_sentinels, sentinel_password="${SENTINEL_PASSWORD}", **user)
    settings = config(upstream, redis, other={"limits": {"rpm": 5}})
    env = {**ENV, "SENTINEL_PASSWORD": SENTINEL_PASSWORD}
    created = await asyncio.to_thread(keys_command, "-c", write_config(tmp_path, settings), "create", "by-cli", env=env)
    assert created.returncode == 0, created.stderr
    gateway = await make_gateway(settings, env)

    answers = await asyncio.gather(*(post(http, gateway, OTHER) for _ in range(10)))
    by_cli = await post(http, gateway, {"Authorization": f"Bearer {created.stdout.strip()}"})

    assert codes(answers) == {(200, None): 5, (429, "rate_limit_exceeded"): 5}  # counted in the master
    assert by_cli[0] == 200  # the key the CLI stored in the master, through the same Sentinels
    status, body = await ready(http, gateway)
    assert (status, body["redis"]) == (200, "ok")
    loaded = parse_config(yaml.safe_dump(settings), env)
    target = loaded.config.redis.target()
    assert target.sentinel_password == SENTINEL_PASSWORD
    printed = [repr(loaded), str(loaded.config), repr(target), target.describe()]
    written = [*map(repr, (answers, by_cli, body)), await scrape(http, gateway), *printed, created.stderr]
    captured = capfd.readouterr()
    assert leaks_in("\n".join([*written, caplog.text, captured.out, captured.err]), [SENTINEL_PASSWORD]) == []


@pytest.mark.parametrize("given", ["a wrong password", "no password"])
async def test_sentinels_refusing_the_credentials_are_named_and_no_password_is_shown(
    guarded_sentinels: SentinelSetup,
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    http: ClientSession,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
    given: str,
) -> None:
    wrong = canary("bad-")
    credentials = {"sentinel_password": "${SENTINEL_PASSWORD}"} if given == "a wrong password" else {}
    settings = config(upstream, sentinel_block(guarded_sentinels, **credentials), team={"limits": {"rpm": 100}})
    env = {**ENV, "SENTINEL_PASSWORD": wrong}
    gateway = await make_gateway(settings, env)

    status, body, _ = await post(http, gateway, TEAM)
    listed = await asyncio.to_thread(keys_command, "-c", write_config(tmp_path, settings), "list", env=env)

    assert (status, body["error"]["code"]) == UNAVAILABLE  # on_redis_error: closed
    readiness, checks = await ready(http, gateway)
    assert (readiness, checks["redis"]) == (503, "unreachable")
    limits_lines = [r.getMessage() for r in caplog.records if r.name == "policies.limits.service"]
    # The limits' log line says what to fix, not only the failure's type.
    assert any("SentinelAuthenticationError: the Sentinels at" in line for line in limits_lines), limits_lines
    assert any("redis.sentinel_password" in line for line in limits_lines), limits_lines
    assert listed.returncode == 1
    [line] = problem_lines(listed)
    assert "redis.sentinel_password" in line
    assert ("refused the gateway's credentials" if credentials else "require a password") in line
    captured = capfd.readouterr()
    written = [repr(body), line, listed.stdout, caplog.text, captured.out, captured.err, await scrape(http, gateway)]
    assert leaks_in("\n".join(written), [wrong, SENTINEL_PASSWORD]) == []
