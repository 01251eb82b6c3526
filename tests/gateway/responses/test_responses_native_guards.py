"""Guardrails and the cache on `/v1/responses` native pass-through (`responses: native`), against
the loopback fake of OpenAI's Responses API (`tests.support.fake_responses`), with the real `openai`
SDK as the client.

In: a deny refuses before any call; a redaction is written into the body the upstream gets (input
items, instructions, and an item only a native deployment is sent, which is checked on its own).
Out: a deny withholds the answer the way the Responses API says a filtered one ends (`incomplete`,
`incomplete_details.reason: content_filter`, no output); on a stream the texts go through the stream
guard as the deltas flow (held back only where a pattern could complete), so a canary split over
deltas never reaches the client, and the stream ends with `response.incomplete`, its events still
numbered in order; a redaction rewrites the text in every event that carries it. What is stored is
what the client got, and an answer a check changed is continued by writing the chain into `input`.
The cache: a repeat is one upstream call, a plain answer byte for byte, a stream the same events;
another key never gets the first key's answer (its id is the first key's)."""

from __future__ import annotations

from typing import Any

import openai
import orjson
import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer
from pytest_aiohttp import AiohttpServer

from tests.conftest import GatewayFactory
from tests.support.fake_responses import FakeResponses

PROVIDER_KEY = "sk-upstream-guards-0123456789abcdef"
KEY_A, KEY_B = "sk-team-a-guards-0123456789abcdef", "sk-team-b-guards-0123456789abcdef"
SSN = "536-22-8471"
STATUS = "x-gateway-cache-status"
Json = dict[str, Any]


@pytest.fixture
async def fake(aiohttp_server: AiohttpServer) -> FakeResponses:
    fake = FakeResponses()
    server = await aiohttp_server(fake.app())
    fake.base_url = fake.chat.base_url = str(server.make_url("/v1"))
    return fake


@pytest.fixture(params=["memory", "redis"])
async def gateway(
    request: pytest.FixtureRequest, make_gateway: GatewayFactory, fake: FakeResponses, redis_url: str, redis_prefix: str
) -> TestServer:
    native = {"type": "openai", "base_url": fake.base_url, "model": "gpt-up", "api_key": "${K}", "responses": "native"}

    def gpt(name: str, *policies: str) -> Json:
        return {"name": name, "provider": native, "retries": 0, "policies": list(policies)}

    config: Json = {
        "deployments": [
            gpt("deny-in", "deny-in"),
            gpt("redact-in", "redact-in"),
            gpt("deny-out", "deny-out"),
            gpt("redact-out", "redact-out"),
            gpt("cached", "cached"),
        ],
        "policies": {
            "deny-in": {"input": [{"check": "pii", "action": "deny"}]},
            "redact-in": {"input": [{"check": "pii", "action": "redact"}]},
            "deny-out": {"output": [{"check": "pii", "action": "deny"}]},
            "redact-out": {"output": [{"check": "pii", "action": "redact"}]},
            "cached": {"cache": {"ttl_s": 60}},
        },
        "keys": [{"name": "team-a", "key": "${KEY_A}"}, {"name": "team-b", "key": "${KEY_B}"}],
    }
    if request.param == "redis":  # stored responses and cache entries in Redis only
        config["redis"] = {"url": redis_url, "prefix": redis_prefix}
        config["cache"] = {"memory_max_bytes": 0, "redis_timeout_ms": 1000}
    return await make_gateway(config, {"K": PROVIDER_KEY, "KEY_A": KEY_A, "KEY_B": KEY_B})


def sdk(gateway: TestServer, key: str = KEY_A) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=str(gateway.make_url("/v1")), api_key=key, max_retries=0)


async def post(http: ClientSession, gateway: TestServer, body: Json, key: str = KEY_A) -> tuple[int, bytes, Any]:
    async with http.post(
        gateway.make_url("/v1/responses"), json=body, headers={"Authorization": f"Bearer {key}"}
    ) as response:
        return response.status, await response.read(), response.headers


def events_of(raw: bytes) -> list[Json]:
    return [orjson.loads(block.split(b"data: ", 1)[1]) for block in raw.split(b"\n\n") if b"data: " in block]


async def test_an_input_deny_refuses_before_any_call_even_in_an_item_only_the_upstream_gets(
    gateway: TestServer, fake: FakeResponses, http: ClientSession
) -> None:
    status, raw, _ = await post(http, gateway, {"model": "deny-in", "input": f"My SSN is {SSN}"})
    assert (status, orjson.loads(raw)["error"]["param"]) == (400, "input")
    search = {
        "type": "web_search_call",
        "id": "ws_1",
        "status": "completed",
        "action": {"type": "search", "query": SSN},
    }
    body = {
        "model": "deny-in",
        "input": [search, {"role": "user", "content": "go on"}],
        "tools": [{"type": "web_search"}],
    }
    status, raw, _ = await post(http, gateway, body)
    assert (status, orjson.loads(raw)["error"]["param"]) == (400, "input[0].action.query")
    assert not fake.responses


async def test_an_input_redaction_is_written_into_the_body_the_upstream_gets(
    gateway: TestServer, fake: FakeResponses
) -> None:
    search = {
        "type": "web_search_call",
        "id": "ws_1",
        "status": "completed",
        "action": {"type": "search", "query": SSN},
    }
    async with sdk(gateway) as client:
        made = await client.responses.create(
            model="redact-in",
            instructions=f"The user's SSN is {SSN}.",
            input=[search, {"role": "user", "content": [{"type": "input_text", "text": f"Is {SSN} mine?"}]}],  # type: ignore[list-item]
            tools=[{"type": "web_search"}],
        )
        stored = (await client.responses.input_items.list(made.id, order="asc")).data

    sent = fake.responses[-1]
    assert SSN not in sent.raw.decode()
    assert sent.body["instructions"] == "The user's SSN is [SSN]."
    assert sent.body["input"][0] == {**search, "action": {"type": "search", "query": "[SSN]"}}
    assert sent.body["input"][1]["content"][0]["text"] == "Is [SSN] mine?"
    assert sent.body["tools"] == [{"type": "web_search"}]
    assert SSN not in str([item.model_dump() for item in stored])  # stored as the upstream got it


async def test_an_output_deny_withholds_the_answer_as_an_incomplete_response(
    gateway: TestServer, fake: FakeResponses, http: ClientSession
) -> None:
    fake.text = f"Your SSN is {SSN}."
    status, raw, headers = await post(http, gateway, {"model": "deny-out", "input": "what is my SSN?"})

    assert status == 200
    assert SSN not in raw.decode()
    assert "pii" in headers["x-gateway-guardrails"]
    async with sdk(gateway) as client:
        made = await client.responses.create(model="deny-out", input="again?")
        assert (made.status, made.incomplete_details.reason) == ("incomplete", "content_filter")  # type: ignore[union-attr]
        assert (made.output, made.output_text) == ([], "")
        assert made.usage is not None
        assert made.usage.output_tokens == 7
        stored = await client.responses.retrieve(made.id)
        assert stored.status == "incomplete"
        assert SSN not in stored.model_dump_json()


async def test_a_canary_split_over_deltas_never_reaches_a_streaming_client(
    gateway: TestServer, fake: FakeResponses, http: ClientSession
) -> None:
    fake.text = f"Your number: {SSN}. Bye"
    fake.pieces = ["Your number: 536-", "22-", "8471.", " Bye"]
    status, raw, _ = await post(http, gateway, {"model": "deny-out", "input": "number?", "stream": True})

    assert status == 200
    assert b"536-22" not in raw
    assert b"8471" not in raw
    events = events_of(raw)
    assert [event["sequence_number"] for event in events] == list(range(len(events)))
    assert [event["type"] for event in events[-2:]] == ["response.output_item.done", "response.incomplete"]
    released = "".join(event["delta"] for event in events if event["type"] == "response.output_text.delta")
    assert "Your number: ".startswith(released)  # what came before the canary, as far as the guard let it go
    final = events[-1]["response"]
    assert (final["status"], final["incomplete_details"]) == ("incomplete", {"reason": "content_filter"})
    assert final["output"][0]["content"][0]["text"] == released
    assert final["output"][0]["status"] == "incomplete"

    async with sdk(gateway) as client:  # the SDK reads it, and the stored copy is what the client got
        stream = await client.responses.create(model="deny-out", input="number?", stream=True)
        parsed = [event async for event in stream]
        assert parsed[-1].type == "response.incomplete"
        stored = await client.responses.retrieve(final["id"])
        assert stored.output_text == released


async def test_a_redaction_rewrites_the_text_in_every_event_and_in_what_is_stored(
    gateway: TestServer, fake: FakeResponses, http: ClientSession
) -> None:
    fake.text = f"It is {SSN}, friend"
    fake.pieces = ["It is 536-", "22-8471", ", friend"]
    async with sdk(gateway) as client:
        plain = await client.responses.create(model="redact-out", input="mine?")
        assert plain.output_text == "It is [SSN], friend"
        async with client.responses.stream(model="redact-out", input="mine?") as stream:
            final = await stream.get_final_response()
        assert final.output_text == "It is [SSN], friend"
        assert (await client.responses.retrieve(final.id)).output_text == "It is [SSN], friend"

        # The upstream holds the text before the redaction: a continuation is sent the chain as stored.
        await client.responses.create(model="redact-out", input="and?", previous_response_id=final.id)
        sent = fake.responses[-1].body
        assert "previous_response_id" not in sent
        assert sent["input"][1]["content"][0]["text"] == "It is [SSN], friend"

    status, raw, _ = await post(http, gateway, {"model": "redact-out", "input": "mine?", "stream": True})
    assert status == 200
    assert SSN not in raw.decode()
    events = events_of(raw)
    done = [event["text"] for event in events if event["type"] == "response.output_text.done"]
    assert done == ["It is [SSN], friend"]
    assert [event["sequence_number"] for event in events] == list(range(len(events)))


async def test_a_repeat_is_one_upstream_call_and_comes_back_as_it_came(
    gateway: TestServer, fake: FakeResponses, http: ClientSession
) -> None:
    body = {"model": "cached", "input": "cache me", "temperature": 0}
    first = await post(http, gateway, body)
    again = await post(http, gateway, body)
    assert (first[0], again[0]) == (200, 200)
    assert (first[2][STATUS], again[2][STATUS]) == ("MISS", "HIT")
    assert again[1] == first[1]
    assert len(fake.responses) == 1

    streamed = await post(http, gateway, {**body, "stream": True})
    replayed = await post(http, gateway, {**body, "stream": True})
    assert (streamed[2][STATUS], replayed[2][STATUS]) == ("MISS", "HIT")
    assert replayed[1] == streamed[1]  # the same events, the same bytes
    assert len(fake.responses) == 2

    # Another key's identical request is its own call: the answer's id is the first key's.
    other = await post(http, gateway, body, KEY_B)
    assert other[2][STATUS] == "MISS"
    assert len(fake.responses) == 3
    async with sdk(gateway) as client:  # the replayed answers are stored for their owner
        for raw in (first[1], events_of(streamed[1])[-1]):
            response_id = orjson.loads(raw)["id"] if isinstance(raw, bytes) else raw["response"]["id"]
            assert (await client.responses.retrieve(response_id)).status == "completed"
