"""`/v1/responses` on an `openai` deployment with `responses: native`: native pass-through, against a
loopback fake of OpenAI's Responses API (`tests.support.fake_responses`) that records the bytes it is
sent, with the real `openai` SDK as the client.

The upstream gets the client's body as it came (the model replaced, the deployment's credential);
the answer comes back byte for byte and a stream event for event (the same bytes); the response is
stored under its upstream id for the key that made it (retrieve, input items, delete: another key
gets 404; `store: false` keeps nothing) and deleted upstream with it; previous_response_id is passed
through when the response it names is that deployment's own, else the chain is written into
`input`; built-in tools go through (no `x-gateway-dropped-tools`), where a bridged deployment
refuses or leaves them out; usage is the upstream's, priced and logged under the `responses` api.
Guardrails and the cache on this path: `test_responses_native_guards`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import orjson
import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer
from pytest_aiohttp import AiohttpServer

from tests.conftest import GatewayFactory
from tests.support.fake_anthropic import Anthropic
from tests.support.fake_responses import USAGE, FakeResponses, frame
from tests.support.observability_helpers import log_lines
from tests.support.otlp_receiver import OtlpReceiver

PROVIDER_KEY = "sk-upstream-native-0123456789abcdef"
KEY_A, KEY_B = "sk-team-a-native-0123456789abcdef", "sk-team-b-native-0123456789abcdef"
# 31 input tokens (8 of them cached) and 7 output: (23 x 2 + 8 x 0.5 + 7 x 8) per million = 106e-6 USD
PRICE = {"prompt_per_1m": 2.0, "completion_per_1m": 8.0, "cached_prompt_per_1m": 0.5}
Json = dict[str, Any]


@pytest.fixture
async def fake(aiohttp_server: AiohttpServer) -> FakeResponses:
    fake = FakeResponses()
    server = await aiohttp_server(fake.app())
    fake.base_url = fake.chat.base_url = str(server.make_url("/v1"))
    return fake


@pytest.fixture
async def gateway(make_gateway: GatewayFactory, fake: FakeResponses, tmp_path: Path) -> TestServer:
    native = {"type": "openai", "base_url": fake.base_url, "model": "gpt-up", "api_key": "${K}", "responses": "native"}
    bridged = {"type": "openai", "base_url": fake.base_url, "api_key": "${K}"}
    root = fake.base_url.removesuffix("/v1")
    azure = {"type": "azure", "endpoint": root, "azure_deployment": "gpt-az", "api_key": "${K}", "responses": "native"}
    config = {
        "deployments": [
            {"name": "gpt", "provider": native, "retries": 0, "price": PRICE},
            {"name": "other", "provider": native, "retries": 0},
            {"name": "chat", "provider": bridged, "retries": 0},
            {"name": "falls", "provider": native, "retries": 0, "fallbacks": ["chat"]},
            {"name": "azure", "provider": azure, "retries": 0},
        ],
        "keys": [{"name": "team-a", "key": "${KEY_A}"}, {"name": "team-b", "key": "${KEY_B}"}],
        "observability": {"access_log": {"path": str(tmp_path / "access.log")}},
    }
    return await make_gateway(config, {"K": PROVIDER_KEY, "KEY_A": KEY_A, "KEY_B": KEY_B})


def sdk(gateway: TestServer, key: str = KEY_A) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=str(gateway.make_url("/v1")), api_key=key, max_retries=0)


async def post(http: ClientSession, gateway: TestServer, body: Json) -> tuple[int, bytes, Any]:
    headers = {"Authorization": f"Bearer {KEY_A}"}
    async with http.post(gateway.make_url("/v1/responses"), json=body, headers=headers) as response:
        return response.status, await response.read(), response.headers


async def test_the_upstream_gets_the_body_as_sent_and_the_answer_comes_back_as_it_came(
    gateway: TestServer, fake: FakeResponses, http: ClientSession
) -> None:
    body: Json = {
        "model": "gpt",
        "input": "hello there",
        "instructions": "Be brief.",
        "include": ["reasoning.encrypted_content"],
    }
    body["reasoning"] = {"effort": "low", "summary": "auto"}
    status, raw, headers = await post(http, gateway, body)

    assert status == 200
    answer = orjson.loads(raw)
    assert raw == json.dumps(fake.stored[answer["id"]]).encode()  # byte for byte: the upstream's spacing
    [seen] = fake.responses
    assert seen.path == "/v1/responses"
    assert seen.raw == orjson.dumps({**body, "model": "gpt-up"})  # the model in its place, nothing else changed
    assert seen.headers["Authorization"] == f"Bearer {PROVIDER_KEY}"
    assert KEY_A not in str(dict(seen.headers))
    assert headers["x-gateway-deployment"] == "gpt"


async def test_the_sdk_round_trip_stores_the_response_under_its_upstream_id(
    gateway: TestServer, fake: FakeResponses
) -> None:
    async with sdk(gateway) as client:
        made = await client.responses.create(model="gpt", input=[{"role": "user", "content": "canary-51 hi"}])
        assert made.id in fake.stored
        assert made.output_text == "echo: canary-51 hi"
        assert made.usage is not None
        assert made.usage.input_tokens_details.cached_tokens == 8

        got = await client.responses.retrieve(made.id)
        assert got.model_dump() == made.model_dump()
        [item] = (await client.responses.input_items.list(made.id)).data
        assert item.type == "message"
        assert item.content[0].text == "canary-51 hi"  # type: ignore[union-attr]


async def test_a_stream_is_relayed_event_for_event(
    gateway: TestServer, fake: FakeResponses, http: ClientSession
) -> None:
    status, raw, headers = await post(http, gateway, {"model": "gpt", "input": "stream these words", "stream": True})

    assert status == 200
    assert headers["Content-Type"].startswith("text/event-stream")
    [response] = fake.stored.values()
    assert raw == b"".join(frame(event) for event in fake.events(response))  # the upstream's own bytes
    async with sdk(gateway) as client:
        stored = await client.responses.retrieve(response["id"])
        assert stored.output_text == "echo: stream these words"

        stream = await client.responses.create(model="gpt", input="and these", stream=True)
        events = [event async for event in stream]
        assert [event.sequence_number for event in events] == list(range(len(events)))
        assert events[-1].type == "response.completed"
        async with client.responses.stream(model="gpt", input="helper too") as helper:
            final = await helper.get_final_response()
        assert final.output_text == "echo: helper too"


async def test_usage_is_the_upstreams_priced_and_logged_under_the_responses_api(
    gateway: TestServer, http: ClientSession, tmp_path: Path
) -> None:
    status, _, headers = await post(http, gateway, {"model": "gpt", "input": "price me"})
    assert status == 200
    assert headers["x-gateway-cost-usd"] == "0.000106"
    status, _, _ = await post(http, gateway, {"model": "gpt", "input": "price me", "stream": True})
    assert status == 200

    lines = [line for line in await log_lines(tmp_path / "access.log", 2) if line["path"] == "/v1/responses"]
    for line in lines:
        assert (line["api"], line["deployment"]) == ("responses", "gpt")
        assert (line["prompt_tokens"], line["completion_tokens"]) == (USAGE["input_tokens"], USAGE["output_tokens"])
        assert line["cost_usd"] == pytest.approx(106e-6)
    async with http.get(gateway.make_url("/metrics")) as response:
        metrics = await response.text()
    assert 'api="responses"' in metrics


async def test_another_keys_id_is_404_and_delete_reaches_the_upstream(gateway: TestServer, fake: FakeResponses) -> None:
    async with sdk(gateway, KEY_A) as owner, sdk(gateway, KEY_B) as other:
        made = await owner.responses.create(model="gpt", input="canary-7d1f mine")
        for attempt in (
            other.responses.retrieve(made.id),
            other.responses.input_items.list(made.id),
            other.responses.delete(made.id),
            other.responses.create(model="gpt", input="more", previous_response_id=made.id),
        ):
            with pytest.raises(openai.NotFoundError) as refused:
                await attempt
            assert "canary-7d1f" not in str(refused.value.body)
        assert len(fake.responses) == 1  # the other key's continuation never reached the upstream

        await owner.responses.delete(made.id)
        assert made.id not in fake.stored  # deleted upstream too, with the deployment's credential
        assert fake.seen[-1].headers["Authorization"] == f"Bearer {PROVIDER_KEY}"
        with pytest.raises(openai.NotFoundError):
            await owner.responses.retrieve(made.id)


async def test_store_false_keeps_nothing_here_or_upstream(gateway: TestServer, fake: FakeResponses) -> None:
    async with sdk(gateway) as client:
        made = await client.responses.create(model="gpt", input="forget me", store=False)
        assert made.output_text == "echo: forget me"
        assert fake.responses[0].body["store"] is False
        assert not fake.stored
        with pytest.raises(openai.NotFoundError):
            await client.responses.retrieve(made.id)
        with pytest.raises(openai.NotFoundError):
            await client.responses.create(model="gpt", input="more", previous_response_id=made.id)


async def test_previous_response_id_goes_through_to_the_deployment_that_answered_it(
    gateway: TestServer, fake: FakeResponses
) -> None:
    async with sdk(gateway) as client:
        first = await client.responses.create(model="gpt", input="one")
        second = await client.responses.create(model="gpt", input="two", previous_response_id=first.id)
        assert fake.responses[-1].body == {"model": "gpt-up", "input": "two", "previous_response_id": first.id}

        # Another deployment (another upstream, as far as the gateway knows): the chain, written into input.
        await client.responses.create(model="other", input="three", previous_response_id=second.id)
        sent = fake.responses[-1].body
        assert "previous_response_id" not in sent
        texts = [
            item["content"] if isinstance(item["content"], str) else item["content"][0]["text"]
            for item in sent["input"]
        ]
        assert texts == ["one", "echo: one", "two", "echo: two", "three"]
        assert all("id" not in item for item in sent["input"])
        third = fake.responses[-1]
        third_id = next(
            rid for rid, stored in fake.stored.items() if stored["output"][0]["content"][0]["text"] == "echo: three"
        )
        [own] = (await client.responses.input_items.list(third_id)).data  # its own, not the chain's again
        assert own.content[0].text == "three"  # type: ignore[union-attr,index]
        assert third.body["input"][-1]["content"] == "three"

        # A bridged deployment continues a native response from the stored chain, as always.
        await client.responses.create(model="chat", input="four", previous_response_id=second.id)
        messages = fake.chat.received[-1].body["messages"]
        assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]


async def test_a_continued_bridged_response_is_written_into_input(gateway: TestServer, fake: FakeResponses) -> None:
    async with sdk(gateway) as client:
        bridged = await client.responses.create(model="chat", input="hi there")
        await client.responses.create(model="gpt", input="and now", previous_response_id=bridged.id)
    sent = fake.responses[-1].body
    assert "previous_response_id" not in sent
    assert [item["role"] for item in sent["input"]] == ["user", "assistant", "user"]
    assert sent["input"][1]["content"][0]["text"] == bridged.output_text


async def test_built_in_tools_go_through_where_a_bridged_deployment_leaves_them_out(
    gateway: TestServer, fake: FakeResponses, http: ClientSession
) -> None:
    tools = [{"type": "web_search", "user_location": {"type": "approximate", "city": "Paris"}}]
    body = {"model": "gpt", "input": "weather in Paris", "tools": tools, "tool_choice": {"type": "web_search"}}
    status, raw, headers = await post(http, gateway, body)

    assert status == 200
    assert "x-gateway-dropped-tools" not in headers
    assert fake.responses[-1].body["tools"] == tools
    assert fake.responses[-1].body["tool_choice"] == {"type": "web_search"}
    assert [item["type"] for item in orjson.loads(raw)["output"]] == ["web_search_call", "message"]

    # Items the bridge has no place for go to a native deployment as they came, and are stored.
    search = orjson.loads(raw)["output"][0]
    later = {"model": "gpt", "input": [search, {"role": "user", "content": "and tomorrow?"}], "tools": tools}
    status, raw, _ = await post(http, gateway, later)
    assert status == 200
    assert fake.responses[-1].body["input"][0] == search

    # A bridged deployment: the tool left out and named, a tool_choice requiring it refused, the item too.
    status, _, headers = await post(http, gateway, {**body, "model": "chat", "tool_choice": "auto"})
    assert (status, headers["x-gateway-dropped-tools"]) == (200, "web_search")
    for refused, param in ((body, "tool_choice"), (later, "input[0].type")):
        status, raw, _ = await post(http, gateway, {**refused, "model": "chat"})
        assert (status, orjson.loads(raw)["error"]["param"]) == (400, param)


async def test_an_upstream_failure_is_an_error_and_mid_stream_an_error_event(
    gateway: TestServer, fake: FakeResponses, http: ClientSession, tmp_path: Path
) -> None:
    fake.statuses.append((429, {"message": "Rate limit reached.", "type": "requests", "code": "rate_limit_exceeded"}))
    async with sdk(gateway) as client:
        with pytest.raises(openai.RateLimitError):
            await client.responses.create(model="gpt", input="x")

    fake.error_after = 4
    body = {"model": "gpt", "input": "one two three", "stream": True}
    async with http.post(
        gateway.make_url("/v1/responses"), json=body, headers={"Authorization": f"Bearer {KEY_A}"}
    ) as response:
        first = await response.content.readany()  # the stream has begun: the client has events
        fake.gate.set()
        raw = first + await response.read()

    assert response.status == 200
    frames = [block for block in raw.split(b"\n\n") if block]
    names = [block.split(b"\n")[0] for block in frames]
    assert names[:4] == [
        b"event: response.created",
        b"event: response.in_progress",
        b"event: response.output_item.added",
        b"event: response.content_part.added",
    ]
    assert names[4:] == [b"event: error"]  # the upstream's failure, scrubbed, as the Responses API's error event
    error = orjson.loads(frames[4].split(b"data: ", 1)[1])
    assert (error["type"], error["sequence_number"]) == ("error", 4)
    assert "failed mid-answer" in error["message"]
    lines = await log_lines(tmp_path / "access.log", 2)
    assert lines[-1]["stream_error"] is True
    created = orjson.loads(frames[0].split(b"data: ", 1)[1])["response"]["id"]
    async with sdk(gateway) as client:
        with pytest.raises(openai.NotFoundError):  # a failed stream is not stored
            await client.responses.retrieve(created)


async def test_a_fallback_to_a_bridged_deployment_answers_through_the_bridge(
    gateway: TestServer, fake: FakeResponses, http: ClientSession
) -> None:
    fake.statuses.append((500, {"message": "down", "type": "server_error"}))
    fake.statuses.append((500, {"message": "down", "type": "server_error"}))
    async with sdk(gateway) as client:
        made = await client.responses.create(model="falls", input="via chat")
        assert made.output_text == "echo: via chat"  # the chat answer, rendered by the bridge
        assert made.id not in fake.stored
        assert (await client.responses.retrieve(made.id)).output_text == made.output_text
        async with client.responses.stream(model="falls", input="streamed via chat") as stream:
            final = await stream.get_final_response()
    assert len(fake.chat.received) == 2
    assert final.output_text.strip() == "echo: streamed via chat"
    assert "messages" in fake.chat.received[-1].body  # the chat view, as a bridged deployment gets it


async def test_a_bridged_stream_on_this_gateway_still_ends_as_the_bridge_ends_it(
    gateway: TestServer, http: ClientSession
) -> None:
    status, raw, _ = await post(http, gateway, {"model": "chat", "input": "bridged words", "stream": True})
    assert status == 200
    assert raw.startswith(b"event: response.created\ndata: ")
    assert raw.endswith(b"data: [DONE]\n\n")
    async with sdk(gateway) as client, client.responses.stream(model="chat", input="bridged words") as stream:
        final = await stream.get_final_response()
    assert final.status == "completed"


async def test_an_azure_deployment_speaks_azures_own_responses_api(gateway: TestServer, fake: FakeResponses) -> None:
    async with sdk(gateway) as client:
        made = await client.responses.create(model="azure", input="hello azure")
    assert made.output_text == "echo: hello azure"
    [seen] = fake.responses
    assert seen.path == "/openai/v1/responses"
    assert seen.body == {"model": "gpt-az", "input": "hello azure"}  # the model deployment, named in the body
    assert seen.headers["api-key"] == PROVIDER_KEY


async def test_another_providers_native_api_never_gets_a_responses_body(
    make_gateway: GatewayFactory, fake: FakeResponses, aiohttp_server: AiohttpServer
) -> None:
    claude = await Anthropic.started(aiohttp_server)
    native = {"type": "openai", "base_url": fake.base_url, "api_key": "${K}", "responses": "native"}
    anthropic = {"type": "anthropic", "base_url": claude.base_url, "model": "claude-up", "api_key": "${K}"}
    config = {
        "deployments": [
            {"name": "gpt", "provider": native, "retries": 0},
            {"name": "claude", "provider": anthropic, "retries": 0},
        ]
    }
    gateway = await make_gateway(config, {"K": PROVIDER_KEY})
    async with sdk(gateway) as client:
        made = await client.responses.create(model="claude", input="hi claude")
    assert made.output_text == "Sunny in Paris."  # the fake's Messages answer, bridged back
    [seen] = claude.seen
    assert seen.body["messages"] == [{"role": "user", "content": "hi claude"}]  # translated from the chat view
    assert "input" not in seen.body
    assert not fake.seen


@pytest.fixture
async def receiver(aiohttp_server: AiohttpServer, monkeypatch: pytest.MonkeyPatch) -> OtlpReceiver:
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "20")
    found = OtlpReceiver()
    found.url = str((await aiohttp_server(found.app())).make_url("")).rstrip("/")
    return found


async def test_each_native_call_is_a_genai_span_with_the_upstreams_usage(
    make_gateway: GatewayFactory, fake: FakeResponses, receiver: OtlpReceiver
) -> None:
    native = {"type": "openai", "base_url": fake.base_url, "model": "gpt-up", "responses": "native"}
    tracing = {"enabled": True, "endpoint": receiver.url}
    config = {"deployments": [{"name": "gpt", "provider": native}], "observability": {"tracing": tracing}}
    gateway = await make_gateway(config)
    async with sdk(gateway) as client:
        plain = await client.responses.create(model="gpt", input="trace me")
        async with client.responses.stream(model="gpt", input="trace me too") as stream:
            streamed = await stream.get_final_response()

    assert streamed.output_text == "echo: trace me too"
    await receiver.wait_for(4)  # two server spans, two upstream attempts
    spans = receiver.named("chat gpt-up")
    assert len(spans) == 2
    for span in spans:
        assert span.attributes["gateway.deployment"] == "gpt"
        assert (span.attributes["gen_ai.usage.input_tokens"], span.attributes["gen_ai.usage.output_tokens"]) == (31, 7)
        assert span.attributes["gen_ai.usage.cache_read.input_tokens"] == 8
    assert spans[0].attributes["gen_ai.response.id"] == plain.id
