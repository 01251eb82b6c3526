"""Metadata belongs to the operator: a key's own fields win over `x-gateway-metadata` in the log, the
span and the spend view; a caller only adds fields, bounded in number and size, and the spend
view keeps a bounded number of values per field (beyond it, `other`), however many values callers
invent."""

from __future__ import annotations

import asyncio
import json
import os
import re
import unicodedata
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.config.loader import ConfigError, parse_config
from gateway.keys.spend import OTHER
from tests.conftest import GatewayFactory, deployment, upstream_url
from tests.support.fake_upstream import FakeUpstream
from tests.support.observability_helpers import log_lines

ADMIN_KEY = "adm-" + "0123456789abcdef" * 3
ALPHA_KEY = "gw-alpha-key-0123456789"
OPEN_KEY = "gw-open-key-0123456789"
ENV = {"ALPHA": ALPHA_KEY, "OPEN": OPEN_KEY, "ADMIN": ADMIN_KEY}
BOUNDS = {"max_fields": 3, "max_value_chars": 12}
MAX_VALUES = 4
NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def owned_config(upstream: FakeUpstream, log: Path, **extra: Any) -> dict[str, Any]:
    return {
        "deployments": [deployment("fake", upstream_url(upstream), retries=0)],
        "keys": [
            {"name": "alpha", "key": "${ALPHA}", "metadata": {"team": "alpha", "env": "prod"}},
            {"name": "open", "key": "${OPEN}"},  # no metadata of its own: its callers name the team
        ],
        "admin": {"key": "${ADMIN}"},
        "observability": {
            "access_log": {"path": str(log)},
            "spend": {"metadata_keys": ["team"], "max_values": MAX_VALUES},
            "metadata": BOUNDS,
        },
        **extra,
    }


async def spend(http: ClientSession, gateway: TestServer, group_by: str) -> dict[str, int]:
    admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
    params = {"group_by": group_by, "period": "1d"}
    async with http.get(gateway.make_url("/admin/spend"), params=params, headers=admin) as response:
        assert response.status == 200, await response.text()
        return {row["name"]: row["requests"] for row in (await response.json())["groups"]}


async def test_a_key_tagged_alpha_that_sends_team_beta_is_spent_and_logged_as_alpha(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    http: ClientSession,
    tmp_path: Path,
    redis_settings: dict[str, str],
) -> None:
    log = tmp_path / "access.log"
    gateway = await make_gateway(owned_config(upstream, log, redis=redis_settings), ENV)
    headers = {"Authorization": f"Bearer {ALPHA_KEY}", "x-gateway-metadata": '{"team": "beta", "feature": "chat"}'}

    for _ in range(3):
        async with http.post(
            gateway.make_url("/v1/completions"), json={"model": "fake", "prompt": "x"}, headers=headers
        ) as r:
            assert r.status == 200

    assert await spend(http, gateway, "metadata.team") == {"alpha": 3}
    lines = [line for line in await log_lines(log, 4) if line["path"] == "/v1/completions"]
    assert [line["metadata"] for line in lines] == [{"team": "alpha", "env": "prod", "feature": "chat"}] * 3


async def test_values_beyond_max_values_are_spent_as_other(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession, tmp_path: Path
) -> None:
    gateway = await make_gateway(owned_config(upstream, tmp_path / "access.log"), ENV)
    for index in range(3 * MAX_VALUES):
        headers = {"Authorization": f"Bearer {OPEN_KEY}", "x-gateway-metadata": f'{{"team": "t{index}"}}'}
        async with http.post(
            gateway.make_url("/v1/completions"), json={"model": "fake", "prompt": "x"}, headers=headers
        ) as r:
            assert r.status == 200
    async with http.post(  # a value already kept stays its own group
        gateway.make_url("/v1/completions"),
        json={"model": "fake", "prompt": "x"},
        headers={"Authorization": f"Bearer {OPEN_KEY}", "x-gateway-metadata": '{"team": "t0"}'},
    ) as r:
        assert r.status == 200

    teams = await spend(http, gateway, "metadata.team")
    assert teams == {**{f"t{i}": 1 for i in range(1, MAX_VALUES)}, "t0": 2, OTHER: 2 * MAX_VALUES}


def _within_bounds(metadata: dict[str, str]) -> bool:
    """What the gateway must accept under BOUNDS (and refuse with a 400 otherwise)."""
    return len(metadata) <= BOUNDS["max_fields"] and all(
        NAME.match(name)
        and len(value) <= BOUNDS["max_value_chars"]
        and not any(unicodedata.category(char) == "Cc" for char in value)
        for name, value in metadata.items()
    )


names = st.sampled_from(["team", "env", "feature", "user"]) | st.text(min_size=0, max_size=70)
values = st.text(max_size=16) | st.sampled_from(["a", "b", "c"])
floods = st.lists(st.dictionaries(names, values, max_size=5), min_size=1, max_size=12)
FLOOD = settings(
    max_examples=int(os.environ.get("METADATA_EXAMPLES", "25")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


@pytest.fixture
async def flooded(make_gateway: GatewayFactory, upstream: FakeUpstream, tmp_path: Path) -> TestServer:
    """One gateway for every example (hypothesis runs them inside one test call)."""
    return await make_gateway(owned_config(upstream, tmp_path / "flood.log"), ENV)


@FLOOD
@given(flood=floods, alpha=st.booleans())
async def test_a_flood_of_caller_metadata_stays_bounded_in_every_answer_log_line_and_spend_group(
    flooded: TestServer, http: ClientSession, tmp_path: Path, flood: list[dict[str, str]], alpha: bool
) -> None:
    key = ALPHA_KEY if alpha else OPEN_KEY
    sent = []
    for metadata in flood:
        sent.append(uuid.uuid4().hex)
        header = json.dumps(metadata)  # ASCII: what a header can carry, every other character escaped
        headers = {"Authorization": f"Bearer {key}", "x-gateway-metadata": header, "x-request-id": sent[-1]}
        async with http.post(
            flooded.make_url("/v1/completions"), json={"model": "fake", "prompt": "x"}, headers=headers
        ) as r:
            if _within_bounds(metadata):
                assert r.status == 200, await r.text()
            else:
                assert r.status == 400
                error = (await r.json())["error"]
                assert (error["code"], error["param"]) == ("invalid_header", "x-gateway-metadata")

    teams = await spend(http, flooded, "metadata.team")
    assert len(teams) <= MAX_VALUES + 1  # the values first seen today, and `other` for the rest
    logged = await logged_metadata(tmp_path / "flood.log", sent)
    for metadata in logged:
        assert len(metadata) <= BOUNDS["max_fields"] + (2 if alpha else 0)
        assert all(len(value) <= BOUNDS["max_value_chars"] for value in metadata.values())
        if alpha:  # the key's own team and env, whatever the caller sent
            assert (metadata["team"], metadata["env"]) == ("alpha", "prod")


async def logged_metadata(log: Path, request_ids: list[str]) -> list[dict[str, str]]:
    """The `metadata` of the access log's lines of these requests (those that have one), once all are written."""
    for _ in range(1500):  # 30 s at least: a bound for a hang, the writer takes moments
        lines = [orjson.loads(line) for line in (await asyncio.to_thread(_text, log)).splitlines()]
        found = {line["request_id"]: line for line in lines if line["request_id"] in request_ids}
        if len(found) == len(request_ids):
            return [line["metadata"] for line in found.values() if "metadata" in line]
        await asyncio.sleep(0.02)
    raise AssertionError("the access log lacks lines of the flood")


def _text(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def test_a_config_key_with_unbounded_metadata_is_refused_at_load() -> None:
    base = {"deployments": [{"name": "d", "provider": {"type": "mock"}}]}
    for metadata, problem in (
        ({"team": "a\nb"}, "control characters"),
        ({"team": "x" * 257}, "longer than 256"),
        ({f"f{i}": "v" for i in range(17)}, "at most 16"),
        ({"cost center": "v"}, "A-Za-z0-9_.-"),
    ):
        config = {**base, "keys": [{"name": "k", "sha256": "0" * 64, "metadata": metadata}]}
        with pytest.raises(ConfigError) as raised:
            parse_config(orjson.dumps(config).decode(), {}, source="t.yaml")
        [reported] = raised.value.problems
        assert "metadata" in reported
        assert problem in reported
