"""Which deployment serves a request: by saved name, by tags, by body model or shared alias, and
which ones an API key may use."""

from __future__ import annotations

from collections import Counter
from typing import Any

import openai
import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer
from pytest_aiohttp import AiohttpServer

from tests.conftest import deployment
from tests.support import fake_upstream as fake
from tests.support.fake_upstream import FakeUpstream
from tests.support.routing_helpers import Upstreams, completion, post, sdk, served_by, start_gateway

TEAM_KEY = "team-key-0123456789"
ADMIN_KEY = "admin-key-0123456789"


@pytest.fixture
def upstreams(aiohttp_server: AiohttpServer) -> Upstreams:
    return Upstreams(aiohttp_server)


@pytest.fixture
async def trio(upstreams: Upstreams) -> dict[str, FakeUpstream]:
    a, b, c = await upstreams.start_many("a", "b", "c")
    return {"a": a, "b": b, "c": c}


def trio_config(trio: dict[str, FakeUpstream], **routing: Any) -> dict[str, Any]:
    """a: tags fast+cheap, b: tags fast (a and b share the alias `g`), c: tag slow."""
    return {
        "deployments": [
            deployment("a", trio["a"].base_url, aliases=["g"], tags=["fast", "cheap"], retries=0, timeout_s=30),
            deployment("b", trio["b"].base_url, aliases=["g"], tags=["fast"], retries=0, timeout_s=30),
            deployment("c", trio["c"].base_url, tags=["slow"], retries=0, timeout_s=30),
        ],
        "routing": routing,
    }


def calls(trio: dict[str, FakeUpstream]) -> dict[str, int]:
    return {name: len(upstream.received) for name, upstream in trio.items()}


@pytest.fixture
async def gateway(aiohttp_server: AiohttpServer, trio: dict[str, FakeUpstream]) -> TestServer:
    return await start_gateway(aiohttp_server, trio_config(trio))


async def serve_many(
    http: ClientSession, gateway: TestServer, times: int, body: dict[str, Any], headers: dict[str, str] | None = None
) -> Counter[str]:
    return Counter([await served_by(http, gateway, body, headers) for _ in range(times)])


@pytest.mark.parametrize("header", ["x-gateway-deployment", "x-enkrypt-deployment"])
async def test_deployment_header_picks_the_saved_name(
    gateway: TestServer, trio: dict[str, FakeUpstream], header: str
) -> None:
    async with sdk(gateway, {header: "c"}) as client:
        raw = await client.completions.with_raw_response.create(model="a", prompt="pick me")
        completion_ = raw.parse()

    assert raw.headers["x-gateway-deployment"] == "c"
    assert completion_.choices[0].text == "echo: pick me"
    assert calls(trio) == {"a": 0, "b": 0, "c": 1}


async def test_tags_match_all_by_default(
    http: ClientSession, gateway: TestServer, trio: dict[str, FakeUpstream]
) -> None:
    both = await serve_many(http, gateway, 10, completion("c"), {"x-gateway-tags": "fast, cheap"})
    fast = await serve_many(http, gateway, 20, completion("c"), {"x-gateway-tags": "fast"})

    assert both == {"a": 10}  # only a carries both tags
    assert set(fast) == {"a", "b"}  # the balancer spreads over every deployment tagged fast
    assert trio["c"].received == []  # the body's model is ignored when tags are given


async def test_tags_match_any_when_configured(
    http: ClientSession, aiohttp_server: AiohttpServer, trio: dict[str, FakeUpstream]
) -> None:
    gateway = await start_gateway(aiohttp_server, trio_config(trio, tags_match="any"))

    served = await serve_many(http, gateway, 20, completion("b"), {"x-gateway-tags": "cheap,slow"})

    assert set(served) == {"a", "c"}
    assert trio["b"].received == []


async def test_enkrypt_tags_header_is_an_alias(
    http: ClientSession, gateway: TestServer, trio: dict[str, FakeUpstream]
) -> None:
    served = await serve_many(http, gateway, 3, completion("a"), {"x-enkrypt-tags": "slow"})

    assert served == {"c": 3}


@pytest.mark.parametrize("tags", ["fast", "no-such-tag"])
async def test_name_decides_when_tags_come_too(
    http: ClientSession,
    gateway: TestServer,
    trio: dict[str, FakeUpstream],
    tags: str,
) -> None:
    served = await serve_many(http, gateway, 3, completion("a"), {"x-gateway-deployment": "c", "x-gateway-tags": tags})

    assert served == {"c": 3}
    assert calls(trio) == {
        "a": 0,
        "b": 0,
        "c": 3,
    }  # the tags stay labels (tests/gateway/observability/test_access_log.py)


async def test_body_model_names_a_deployment(
    http: ClientSession, gateway: TestServer, trio: dict[str, FakeUpstream]
) -> None:
    assert await serve_many(http, gateway, 3, completion("b")) == {"b": 3}
    assert calls(trio) == {"a": 0, "b": 3, "c": 0}


async def test_body_model_naming_a_shared_alias_spreads_over_the_group(
    gateway: TestServer, trio: dict[str, FakeUpstream]
) -> None:
    served: Counter[str] = Counter()
    async with sdk(gateway) as client:
        for index in range(20):
            raw = await client.completions.with_raw_response.create(model="g", prompt=f"p{index}")
            assert raw.parse().choices[0].text == f"echo: p{index}"
            served[raw.headers["x-gateway-deployment"]] += 1

    assert set(served) == {"a", "b"}
    assert trio["c"].received == []
    assert len(trio["a"].received) + len(trio["b"].received) == 20


@pytest.mark.parametrize(
    ("body", "headers", "asked", "param"),
    [
        # A header's value is never quoted back (it may be a misplaced key): the message names the header.
        pytest.param(completion("a"), {"x-gateway-deployment": "nope"}, "x-gateway-deployment", "", id="name"),
        pytest.param(completion("a"), {"x-enkrypt-deployment": "nope"}, "x-enkrypt-deployment", "", id="enkrypt"),
        pytest.param(completion("a"), {"x-gateway-tags": "gpu,fast"}, "x-gateway-tags", "", id="tags"),
        pytest.param(completion("a"), {"x-enkrypt-tags": "gpu"}, "x-enkrypt-tags", "", id="enkrypt-tags"),
        pytest.param(completion("gpt-99"), {}, "gpt-99", "model", id="model"),
    ],
)
async def test_nothing_matches_is_a_404_saying_what_was_asked(
    http: ClientSession,
    gateway: TestServer,
    trio: dict[str, FakeUpstream],
    body: dict[str, Any],
    headers: dict[str, str],
    asked: str,
    param: str,
) -> None:
    status, payload, _ = await post(http, gateway, body, headers)

    assert status == 404
    assert asked in payload["error"]["message"]
    assert payload["error"]["param"] == (param or asked)
    assert all(value not in payload["error"]["message"] for value in headers.values())
    assert calls(trio) == {"a": 0, "b": 0, "c": 0}


async def test_sdk_sees_an_unknown_model_as_not_found(gateway: TestServer) -> None:
    async with sdk(gateway) as client:
        with pytest.raises(openai.NotFoundError, match="gpt-99"):
            await client.completions.create(model="gpt-99", prompt="hi")


@pytest.mark.parametrize("value", ["", " , ,"])
@pytest.mark.parametrize("header", ["x-gateway-tags", "x-enkrypt-tags"])
async def test_an_empty_tags_header_is_a_400(
    http: ClientSession, gateway: TestServer, trio: dict[str, FakeUpstream], header: str, value: str
) -> None:
    status, payload, _ = await post(http, gateway, completion("a"), {header: value})

    assert status == 400
    assert payload["error"]["param"] == header
    assert calls(trio) == {"a": 0, "b": 0, "c": 0}


# --- API keys restricted to some deployments ---


@pytest.fixture
async def keyed_gateway(aiohttp_server: AiohttpServer, trio: dict[str, FakeUpstream]) -> TestServer:
    config = trio_config(trio)
    config["deployments"][0]["fallbacks"] = ["b"]
    config["keys"] = [
        {"name": "team", "key": "${TEAM_KEY}", "deployments": ["a"]},
        {"name": "admin", "key": "${ADMIN_KEY}"},
    ]
    return await start_gateway(aiohttp_server, config, env={"TEAM_KEY": TEAM_KEY, "ADMIN_KEY": ADMIN_KEY})


def bearer(key: str, **extra: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}", **extra}


@pytest.mark.parametrize(
    ("body", "headers"),
    [
        pytest.param(completion("b"), {}, id="model"),
        pytest.param(completion("a"), {"x-gateway-deployment": "c"}, id="deployment-header"),
        pytest.param(completion("a"), {"x-gateway-tags": "slow"}, id="tags"),
    ],
)
async def test_a_restricted_key_gets_403_for_other_deployments(
    http: ClientSession,
    keyed_gateway: TestServer,
    trio: dict[str, FakeUpstream],
    body: dict[str, Any],
    headers: dict[str, str],
) -> None:
    status, payload, _ = await post(http, keyed_gateway, body, bearer(TEAM_KEY, **headers))

    assert status == 403
    assert payload["error"]["type"] == "permission_error"
    assert calls(trio) == {"a": 0, "b": 0, "c": 0}


async def test_an_unrestricted_key_may_use_them(http: ClientSession, keyed_gateway: TestServer) -> None:
    assert await served_by(http, keyed_gateway, completion("b"), bearer(ADMIN_KEY)) == "b"
    assert (
        await served_by(http, keyed_gateway, completion("a"), bearer(ADMIN_KEY, **{"x-gateway-deployment": "c"})) == "c"
    )


async def test_a_plan_made_for_an_unrestricted_key_never_serves_a_restricted_one(
    http: ClientSession, keyed_gateway: TestServer, trio: dict[str, FakeUpstream]
) -> None:
    """Plans by model are made once and reused (the hot path); a key limited to some deployments
    still gets its own: 403 for another deployment, and an alias narrowed to what it may use."""
    for _ in range(2):  # the second round reads the plans the first one made
        assert await served_by(http, keyed_gateway, completion("b"), bearer(ADMIN_KEY)) == "b"
        status, _, _ = await post(http, keyed_gateway, completion("b"), bearer(TEAM_KEY))
        assert status == 403
        assert await serve_many(http, keyed_gateway, 6, completion("g"), bearer(TEAM_KEY)) == {"a": 6}
        by_admin = await serve_many(http, keyed_gateway, 20, completion("g"), bearer(ADMIN_KEY))
        assert set(by_admin) == {"a", "b"}
    assert calls(trio)["c"] == 0


async def test_403_for_a_deployment_header_names_that_header(http: ClientSession, keyed_gateway: TestServer) -> None:
    status, payload, _ = await post(
        http, keyed_gateway, completion("a"), bearer(TEAM_KEY, **{"x-gateway-deployment": "c"})
    )

    assert status == 403
    assert payload["error"]["param"] == "x-gateway-deployment"


async def test_group_members_a_key_may_not_use_are_never_called(
    http: ClientSession, keyed_gateway: TestServer, trio: dict[str, FakeUpstream]
) -> None:
    by_alias = await serve_many(http, keyed_gateway, 10, completion("g"), bearer(TEAM_KEY))
    by_tags = await serve_many(http, keyed_gateway, 10, completion("x"), bearer(TEAM_KEY, **{"x-gateway-tags": "fast"}))

    assert by_alias == {"a": 10}
    assert by_tags == {"a": 10}
    assert trio["b"].received == []


async def test_a_fallback_the_key_may_not_use_is_not_called(
    http: ClientSession, keyed_gateway: TestServer, trio: dict[str, FakeUpstream]
) -> None:
    trio["a"].script(fake.status(500), fake.status(500))

    status, _, headers = await post(http, keyed_gateway, completion("a"), bearer(TEAM_KEY))
    admin = await served_by(http, keyed_gateway, completion("a"), bearer(ADMIN_KEY))

    assert status == 502
    assert headers["x-gateway-attempts"] == "1"
    assert admin == "b"  # the same failure falls back to b for a key allowed to use it
    assert len(trio["b"].received) == 1
