"""Fallback chains: per deployment and per group, in order, never for a client error, and for
streams only while nothing has reached the client."""

from __future__ import annotations

from typing import Any

import openai
import pytest
from aiohttp import ClientSession
from pytest_aiohttp import AiohttpServer

from tests.conftest import deployment
from tests.support import fake_upstream as fake
from tests.support.fake_upstream import Behaviour
from tests.support.routing_helpers import Upstreams, completion, events, post, sdk, start_gateway


@pytest.fixture
def upstreams(aiohttp_server: AiohttpServer) -> Upstreams:
    return Upstreams(aiohttp_server)


def config(*deployments: dict[str, Any], **routing: Any) -> dict[str, Any]:
    return {"deployments": list(deployments), "routing": {"breaker": {"enabled": False}, **routing}}


async def test_the_chain_is_tried_in_order_once_retries_are_spent(
    aiohttp_server: AiohttpServer, upstreams: Upstreams
) -> None:
    a, b, c = await upstreams.start_many("a", "b", "c")
    gateway = await start_gateway(
        aiohttp_server,
        config(
            deployment("a", a.base_url, retries=1, fallbacks=["b", "c"]),
            deployment("b", b.base_url, retries=0),
            deployment("c", c.base_url, retries=0),
        ),
    )
    a.script(fake.status(500), fake.status(503))
    b.script(fake.status(502))

    async with sdk(gateway) as client:
        raw = await client.completions.with_raw_response.create(model="a", prompt="fall")

    assert raw.parse().choices[0].text == "echo: fall"
    assert raw.headers["x-gateway-deployment"] == "c"
    assert raw.headers["x-gateway-attempts"] == "4"
    assert upstreams.calls == ["a", "a", "b", "c"]
    routed = events(gateway)
    assert routed.fallbacks[("a", "b")] == 1
    assert routed.fallbacks[("b", "c")] == 1
    assert routed.retries["a"] == 1
    assert routed.attempts == {("a", "retryable"): 2, ("b", "retryable"): 1, ("c", "ok"): 1}


async def test_the_first_fallback_that_answers_ends_the_chain(
    http: ClientSession, aiohttp_server: AiohttpServer, upstreams: Upstreams
) -> None:
    a, b, c = await upstreams.start_many("a", "b", "c")
    gateway = await start_gateway(
        aiohttp_server,
        config(
            deployment("a", a.base_url, retries=0, fallbacks=["b", "c"]),
            deployment("b", b.base_url),
            deployment("c", c.base_url),
        ),
    )
    a.script(fake.drop_connection())

    status, _, headers = await post(http, gateway, completion("a"))

    assert status == 200
    assert headers["x-gateway-deployment"] == "b"
    assert upstreams.calls == ["a", "b"]


async def test_group_fallbacks_from_routing_groups(
    http: ClientSession, aiohttp_server: AiohttpServer, upstreams: Upstreams
) -> None:
    g1, g2, spare = await upstreams.start_many("g1", "g2", "spare")
    gateway = await start_gateway(
        aiohttp_server,
        config(
            deployment("g1", g1.base_url, aliases=["g"], retries=0),
            deployment("g2", g2.base_url, aliases=["g"], retries=0),
            deployment("spare", spare.base_url),
            groups=[{"alias": "g", "fallbacks": ["spare"]}],
        ),
    )
    g1.script(fake.status(500))
    g2.script(fake.status(500))

    status, _, headers = await post(http, gateway, completion("g"))

    assert status == 200
    assert headers["x-gateway-deployment"] == "spare"
    assert headers["x-gateway-attempts"] == "3"
    assert sorted(upstreams.calls[:2]) == ["g1", "g2"]  # every group member before the fallback
    assert upstreams.calls[2] == "spare"


async def test_a_fallback_may_be_a_group(
    http: ClientSession, aiohttp_server: AiohttpServer, upstreams: Upstreams
) -> None:
    a, h1, h2 = await upstreams.start_many("a", "h1", "h2")
    gateway = await start_gateway(
        aiohttp_server,
        config(
            deployment("a", a.base_url, retries=0, fallbacks=["h"]),
            deployment("h1", h1.base_url, aliases=["h"]),
            deployment("h2", h2.base_url, aliases=["h"]),
        ),
    )
    a.script(*[fake.status(503)] * 10)

    served = set()
    for _ in range(10):
        status, _, headers = await post(http, gateway, completion("a"))
        assert status == 200
        served.add(headers["x-gateway-deployment"])

    assert served == {"h1", "h2"}
    assert len(a.received) == 10


@pytest.mark.parametrize("code", [400, 404, 422])
async def test_a_client_error_does_not_fall_back(
    http: ClientSession, aiohttp_server: AiohttpServer, upstreams: Upstreams, code: int
) -> None:
    a, b = await upstreams.start_many("a", "b")
    gateway = await start_gateway(
        aiohttp_server,
        config(deployment("a", a.base_url, retries=2, fallbacks=["b"]), deployment("b", b.base_url)),
    )
    a.script(fake.status(code, {"message": "max_tokens is too large", "type": "invalid_request_error"}))

    status, body, headers = await post(http, gateway, completion("a"))

    assert status == code
    assert body["error"]["message"] == "max_tokens is too large"
    assert headers["x-gateway-deployment"] == "a"
    assert upstreams.calls == ["a"]
    assert events(gateway).fallbacks == {}


async def test_fallbacks_of_fallbacks_are_not_followed_and_cycles_end(
    http: ClientSession, aiohttp_server: AiohttpServer, upstreams: Upstreams
) -> None:
    a, b, c = await upstreams.start_many("a", "b", "c")
    gateway = await start_gateway(
        aiohttp_server,
        config(
            deployment("a", a.base_url, retries=0, fallbacks=["b"]),
            deployment("b", b.base_url, retries=0, fallbacks=["a", "c"]),
            deployment("c", c.base_url),
        ),
    )
    a.script(fake.status(500))
    b.script(fake.status(500))

    status, _, headers = await post(http, gateway, completion("a"))

    assert status == 502
    assert headers["x-gateway-deployment"] == "b"  # the last one tried
    assert upstreams.calls == ["a", "b"]


async def read_stream(client: openai.AsyncOpenAI, prompt: str) -> tuple[str, str]:
    raw = await client.completions.with_raw_response.create(model="a", prompt=prompt, stream=True)
    text = "".join([chunk.choices[0].text async for chunk in raw.parse() if chunk.choices])
    return text, raw.headers["x-gateway-deployment"]


@pytest.mark.parametrize(
    "failure",
    [
        pytest.param(fake.status(500), id="status-500"),
        pytest.param(fake.drop_connection(), id="dropped-before-headers"),
        pytest.param(fake.stream_then_drop([]), id="dropped-before-first-event"),
        pytest.param(fake.raw_sse(b": keep-alive\n\n"), id="ended-before-first-event"),
    ],
)
async def test_a_stream_failing_before_its_first_event_moves_to_the_fallback(
    aiohttp_server: AiohttpServer, upstreams: Upstreams, failure: Behaviour
) -> None:
    a, b = await upstreams.start_many("a", "b")
    gateway = await start_gateway(
        aiohttp_server,
        config(deployment("a", a.base_url, retries=0, fallbacks=["b"]), deployment("b", b.base_url)),
    )
    a.script(failure)

    async with sdk(gateway) as client:
        text, served = await read_stream(client, "one two three")

    assert text == "echo: one two three "
    assert served == "b"
    assert upstreams.calls == ["a", "b"]


async def test_a_stream_failing_after_its_first_event_is_not_retried(
    aiohttp_server: AiohttpServer, upstreams: Upstreams
) -> None:
    a, b = await upstreams.start_many("a", "b")
    gateway = await start_gateway(
        aiohttp_server,
        config(deployment("a", a.base_url, retries=2, fallbacks=["b"]), deployment("b", b.base_url)),
    )
    a.script(fake.stream_then_drop(["Hello ", "wor"]))
    seen: list[str] = []

    async with sdk(gateway) as client:
        stream = await client.completions.create(model="a", prompt="hi", stream=True)

        async def read_all() -> None:
            async for chunk in stream:
                seen.extend(choice.text for choice in chunk.choices)

        with pytest.raises(openai.APIError, match="dropped the stream"):
            await read_all()

    assert "".join(seen) == "Hello wor"  # what was relayed before the failure
    assert upstreams.calls == ["a"]
    assert b.received == []
    assert events(gateway).fallbacks == {}
    assert events(gateway).retries["a"] == 0


async def test_a_deployment_without_its_credential_falls_back_at_once(
    http: ClientSession, aiohttp_server: AiohttpServer, upstreams: Upstreams
) -> None:
    a, b = await upstreams.start_many("a", "b")
    gateway = await start_gateway(
        aiohttp_server,
        config(
            deployment("a", a.base_url, fallbacks=["b"], provider={"api_key": "${ROUTING_TEST_UNSET_KEY}"}),
            deployment("b", b.base_url),
        ),
    )

    status, _, headers = await post(http, gateway, completion("a"))

    assert status == 200
    assert headers["x-gateway-deployment"] == "b"
    assert headers["x-gateway-attempts"] == "1"
    assert upstreams.calls == ["b"]
