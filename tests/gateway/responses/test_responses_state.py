"""Stored responses: retrieved, listed (input_items), deleted, chained through previous_response_id,
each the owner's alone (another API key, or another virtual key, gets 404 and never the content),
`store: false` keeps nothing, what is stored is what the guardrails left (redacted stays redacted),
memory bounded by count and retention (a fake clock), and Redis shared by two gateway apps (one
makes, the other reads, continues and deletes) with the retention as the keys' TTL."""

from __future__ import annotations

import asyncio
from typing import Any

import openai
import pytest
import redis.asyncio as aioredis

from gateway.api.responses.bridge import Bridge
from gateway.api.responses.request import ResponsesRequest
from gateway.pipeline.exchange import ClientScope
from gateway.pipeline.responses.edge import ResponsesEdge
from gateway.pipeline.responses.store import MemoryResponses, stored_record
from tests.conftest import GatewayFactory, deployment
from tests.gateway.responses.test_responses_api import KEY_A, KEY_B, sdk
from tests.support.fake_upstream import FakeUpstream

Json = dict[str, Any]


def keyed(upstream: FakeUpstream, **extra: Any) -> Json:
    fake = deployment("fake", upstream.base_url, retries=0, **extra.pop("deployment", {}))
    keys = [{"name": "team-a", "key": "${KEY_A}"}, {"name": "team-b", "key": "${KEY_B}"}]
    return {"keys": keys, "deployments": [fake], **extra}


ENV = {"KEY_A": KEY_A, "KEY_B": KEY_B}
SEND: Any = {"type": "function", "name": "send", "description": "Sends to jane.doe@example.com", "parameters": {}}


async def test_a_stored_response_is_retrieved_listed_chained_and_deleted_by_its_owner_only(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    gateway = await make_gateway(keyed(upstream), ENV)
    async with sdk(gateway, KEY_A) as owner, sdk(gateway, KEY_B) as other:
        made = await owner.responses.create(
            model="fake", input=[{"role": "user", "content": "canary-7d1f in my words"}], metadata={"t": "1"}
        )
        got = await owner.responses.retrieve(made.id)
        assert got.output_text == made.output_text == "echo: canary-7d1f in my words"
        assert got.metadata == {"t": "1"}
        items = await owner.responses.input_items.list(made.id)
        [item] = items.data
        assert item.type == "message"
        assert item.id

        for attempt in (
            other.responses.retrieve(made.id),
            other.responses.input_items.list(made.id),
            other.responses.delete(made.id),
            other.responses.create(model="fake", input="more", previous_response_id=made.id),
        ):
            with pytest.raises(openai.NotFoundError) as refused:
                await attempt
            assert "canary-7d1f" not in str(refused.value.body)
        assert len(upstream.received) == 1  # the other key's continuation never reached the upstream

        await owner.responses.delete(made.id)
        with pytest.raises(openai.NotFoundError):
            await owner.responses.retrieve(made.id)
        with pytest.raises(openai.NotFoundError):
            await owner.responses.create(model="fake", input="more", previous_response_id=made.id)


async def test_another_virtual_key_of_the_same_api_key_gets_404(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    virtual = [{"name": f"vk-{n}", "provider": "openai", "api_key": f"${{VK_{n.upper()}}}"} for n in ("one", "two")]
    config = keyed(upstream, virtual_keys=virtual)
    config["keys"][0]["virtual_keys"] = ["vk-one", "vk-two"]
    gateway = await make_gateway(config, {**ENV, "VK_ONE": "sk-up-one", "VK_TWO": "sk-up-two"})
    async with sdk(gateway, KEY_A) as client:
        made = await client.responses.create(
            model="fake", input="hi", extra_headers={"x-gateway-virtual-key": "vk-one"}
        )
        await client.responses.retrieve(made.id, extra_headers={"x-gateway-virtual-key": "vk-one"})
        with pytest.raises(openai.NotFoundError):
            await client.responses.retrieve(made.id, extra_headers={"x-gateway-virtual-key": "vk-two"})
        with pytest.raises(openai.NotFoundError):
            await client.responses.retrieve(made.id)


async def test_store_false_keeps_nothing(make_gateway: GatewayFactory, upstream: FakeUpstream) -> None:
    gateway = await make_gateway(keyed(upstream), ENV)
    async with sdk(gateway, KEY_A) as client:
        made = await client.responses.create(model="fake", input="hi", store=False)
        with pytest.raises(openai.NotFoundError):
            await client.responses.retrieve(made.id)
        with pytest.raises(openai.NotFoundError):
            await client.responses.create(model="fake", input="more", previous_response_id=made.id)


async def test_what_is_stored_and_resent_is_what_the_guardrails_left(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    policies = {"guarded": {"input": [{"check": "pii", "action": "redact"}]}}
    gateway = await make_gateway(keyed(upstream, policies=policies, deployment={"policies": ["guarded"]}), ENV)
    async with sdk(gateway, KEY_A) as client:
        made = await client.responses.create(
            model="fake",
            input=[{"role": "user", "content": [{"type": "input_text", "text": "mail jane.doe@example.com"}]}],
            instructions="Reply to jane.doe@example.com",
            tools=[SEND],
            user="jane.doe@example.com",
        )
        items = await client.responses.input_items.list(made.id)
        stored = items.data[0].model_dump_json()
        assert "jane.doe@example.com" not in stored
        assert "jane.doe@example.com" not in (await client.responses.retrieve(made.id)).model_dump_json()
        await client.responses.create(model="fake", input="and then?", previous_response_id=made.id)
    resent = upstream.received[1].body["messages"]
    assert len(resent) == 3  # the first turn, its answer, the new input
    assert "jane.doe@example.com" not in str(resent)


async def test_the_chain_is_the_whole_conversation_in_order(gateway: Any, upstream: FakeUpstream) -> None:
    async with sdk(gateway) as client:
        previous = None
        for turn in ("one", "two", "three"):
            made = await client.responses.create(
                model="fake", input=turn, previous_response_id=previous, instructions=f"rules {turn}"
            )
            previous = made.id
    sent = upstream.received[-1].body["messages"]
    assert sent == [
        {"role": "system", "content": "rules three"},  # instructions are not carried over, as OpenAI does
        {"role": "user", "content": [{"type": "text", "text": "one"}]},  # stored as input_items lists it
        {"role": "assistant", "content": "echo: one"},
        {"role": "user", "content": [{"type": "text", "text": "two"}]},
        {"role": "assistant", "content": "echo: two"},
        {"role": "user", "content": "three"},
    ]


async def test_a_repeat_with_the_same_input_and_chain_is_one_upstream_call(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    fake = deployment("fake", upstream.base_url, retries=0, policies=["cached"])
    gateway = await make_gateway({"deployments": [fake], "policies": {"cached": {"cache": {"ttl_s": 60}}}})
    async with sdk(gateway) as client:
        first = await client.responses.create(model="fake", input="hello")
        answers = [
            await client.responses.create(model="fake", input="next", previous_response_id=first.id) for _ in range(2)
        ]
        other = await client.responses.create(model="fake", input="other")
        changed = await client.responses.create(model="fake", input="next", previous_response_id=other.id)
    assert answers[0].output_text == answers[1].output_text
    assert answers[0].id != answers[1].id
    assert changed.output_text == "echo: next"
    assert len(upstream.received) == 4  # hello, next (once), other, next after another chain


async def test_memory_keeps_at_most_its_bound_and_forgets_after_the_retention() -> None:
    now = [0.0]
    store = MemoryResponses(retention_s=60, max_entries=2, max_bytes=300, clock=lambda: now[0])
    for name in ("a", "b", "c"):
        await store.put(name, stored_record("o", b"{}", [], None))
    assert await store.get("a", "o") is None  # the oldest went first
    assert await store.get("b", "o") is not None
    assert await store.get("b", "someone else") is None
    await store.put("big", stored_record("o", b'{"text":"%s"}' % (b"x" * 200), [], None))
    assert await store.get("b", "o") is None  # bytes bound: the older ones made room
    assert await store.get("big", "o") is not None
    await store.put("huge", stored_record("o", b'{"text":"%s"}' % (b"x" * 400), [], None))
    assert await store.get("huge", "o") is None  # larger than the whole bound: not kept
    now[0] = 61.0
    assert await store.get("big", "o") is None


class HeldStore:
    """A store that waits on the network (as Redis does): each write is held until released."""

    remote = True

    def __init__(self) -> None:
        self.writing = asyncio.Event()
        self.release = asyncio.Event()
        self.records: dict[str, bytes] = {}

    async def put(self, response_id: str, record: bytes) -> None:
        self.writing.set()
        await self.release.wait()
        self.records[response_id] = record


async def test_a_response_stored_over_the_network_is_written_while_the_call_settles() -> None:
    store = HeldStore()
    bridge = Bridge.of(ResponsesRequest.model_validate({"model": "m", "input": "hi"}))
    edge = ResponsesEdge(bridge, store, "owner")  # type: ignore[arg-type]  # a ResponseStore's put and remote
    settled: list[bool] = []

    async def settle() -> None:
        await store.writing.wait()  # the write is on its way before the settle's own round trip
        settled.append(bool(store.records))
        store.release.set()

    scope = ClientScope({})
    scope.settles_with(settle)
    await asyncio.wait_for(edge.save(b"{}", scope), 10)  # in turn, the write would wait for the settle forever
    assert settled == [False]  # settled while the write was in flight
    assert list(store.records) == [bridge.id]  # and stored once save returned
    await scope.settle()
    assert settled == [False]  # the pipeline's own settle finds it done


async def test_two_gateway_apps_share_responses_through_redis(
    make_gateway: GatewayFactory, upstream: FakeUpstream, redis_settings: dict[str, str], redis_url: str
) -> None:
    config = keyed(upstream, redis=redis_settings, responses={"retention_s": 3600})
    one, two = await make_gateway(config, ENV), await make_gateway(config, ENV)
    async with sdk(one, KEY_A) as first, sdk(two, KEY_A) as second, sdk(two, KEY_B) as other:
        made = await first.responses.create(model="fake", input="remember me")
        assert (await second.responses.retrieve(made.id)).output_text == "echo: remember me"
        with pytest.raises(openai.NotFoundError):
            await other.responses.retrieve(made.id)
        continued = await second.responses.create(model="fake", input="again", previous_response_id=made.id)
        assert upstream.received[-1].body["messages"][0]["content"] == [{"type": "text", "text": "remember me"}]
        client = aioredis.from_url(redis_url)
        try:
            ttl = await client.ttl(f"{redis_settings['prefix']}response:{continued.id}")
        finally:
            await client.aclose()
        assert 3500 < ttl <= 3600
        await second.responses.delete(made.id)
        with pytest.raises(openai.NotFoundError):
            await first.responses.retrieve(made.id)


async def test_a_redis_that_fails_is_a_503_for_the_stored_and_the_answer_still_comes(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    config = {
        "deployments": [deployment("fake", upstream.base_url, retries=0)],
        "redis": {"url": "redis://127.0.0.1:1/0"},
    }
    gateway = await make_gateway(config)
    async with sdk(gateway) as client:
        made = await client.responses.create(model="fake", input="hi")  # its storage failed, logged
        assert made.output_text == "echo: hi"
        with pytest.raises(openai.InternalServerError) as refused:
            await client.responses.retrieve(made.id)
    assert refused.value.status_code == 503
    assert refused.value.code == "storage_unavailable"
