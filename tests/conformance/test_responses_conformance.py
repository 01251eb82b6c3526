"""The conformance suite for the Responses API: every deployment type answers `POST /v1/responses`
through the real gateway (bridged onto its chat path; `openai` and `azure` also with
`responses: native`, relayed to their fake's own Responses API) with the `response` the `openai`
SDK parses: plain, streamed (events in order), a function tool round trip through
previous_response_id and through full input, max_output_tokens → incomplete, stored / retrieved /
listed / deleted (upstream too), and `store: false`; another key's id is a 404."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import openai
import orjson
import pytest
from aiohttp.test_utils import TestServer

from tests.conformance.cases import CASES, NATIVE_RESPONSES, ProviderCase
from tests.conformance.conftest import DEPLOYMENT, StartGateway, cases, sdk_for
from tests.conformance.fake_api import FakeAPI, tool_arguments

case = cases([*CASES, *NATIVE_RESPONSES])

WEATHER: Any = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
}


@pytest.fixture(autouse=True)
async def upstream_api(case: ProviderCase, fake: FakeAPI) -> AsyncIterator[None]:
    """After each test: every call that reached the upstream was on the API the deployment speaks
    for `/v1/responses` (its Responses API where native, chat's where bridged)."""
    yield
    paths = [seen.path for seen in fake.received]
    assert all(("/responses" in path) is case.responses_native for path in paths), paths


@pytest.fixture
def serving(gateway: TestServer) -> TestServer:
    """Every deployment type serves chat, so every one serves the bridged Responses API (or its own)."""
    return gateway


async def test_plain_response(serving: TestServer, fake: FakeAPI) -> None:
    async with sdk_for(serving) as client:
        response = await client.responses.create(model=DEPLOYMENT, input="the sky", instructions="be brief")
    assert response.status == "completed"
    assert response.output_text == fake.generate("the sky").text
    assert response.usage is not None
    assert response.usage.total_tokens == response.usage.input_tokens + response.usage.output_tokens


async def test_stream_events_in_order(serving: TestServer, fake: FakeAPI) -> None:
    async with sdk_for(serving) as client, client.responses.stream(model=DEPLOYMENT, input="the sky") as stream:
        events = [event async for event in stream]
        final = await stream.get_final_response()
    assert [event.sequence_number for event in events] == list(range(len(events)))
    kinds = [event.type for event in events]
    assert kinds[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert kinds[-1] == "response.completed"
    assert final.output_text == fake.generate("the sky").text


async def test_max_output_tokens_is_incomplete(serving: TestServer, case: ProviderCase, fake: FakeAPI) -> None:
    limit = max(2, case.min_output_tokens)
    prompt = " ".join(["the sky"] * limit)  # the fakes' answers repeat the prompt: longer than the limit
    async with sdk_for(serving) as client:
        response = await client.responses.create(model=DEPLOYMENT, input=prompt, max_output_tokens=limit)
    assert response.status == "incomplete"
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "max_output_tokens"
    assert response.output_text == fake.generate(prompt, max_tokens=limit).text


async def test_function_tool_round_trip(serving: TestServer, case: ProviderCase, fake: FakeAPI) -> None:
    if not case.tools:
        pytest.skip(f"{case.type} cannot call tools")
    async with sdk_for(serving) as client:
        first = await client.responses.create(model=DEPLOYMENT, input="the sky", tools=[WEATHER])
        [call] = first.output
        assert call.type == "function_call"
        assert call.name == "get_weather"
        assert orjson.loads(call.arguments) == tool_arguments("the sky")
        result: Any = {"type": "function_call_output", "call_id": call.call_id, "output": "sunny and warm"}
        chained = await client.responses.create(
            model=DEPLOYMENT, previous_response_id=first.id, input=[result], tools=[WEATHER]
        )
        full: Any = [{"role": "user", "content": "the sky"}, call.model_dump(exclude_none=True), result]
        whole = await client.responses.create(model=DEPLOYMENT, input=full, tools=[WEATHER], store=False)
    # Some fakes draw the next sample for a prompt seen before, as sampling would.
    assert chained.output_text == fake.generate("sunny and warm").text
    assert whole.output_text in {fake.generate("sunny and warm", sample).text for sample in (0, 1)}


async def test_a_streamed_function_call(serving: TestServer, case: ProviderCase) -> None:
    if not case.tools:
        pytest.skip(f"{case.type} cannot call tools")
    async with (
        sdk_for(serving) as client,
        client.responses.stream(model=DEPLOYMENT, input="the sky", tools=[WEATHER]) as stream,
    ):
        events = [event async for event in stream]
        final = await stream.get_final_response()
    assert [event.sequence_number for event in events] == list(range(len(events)))
    kinds = [event.type for event in events]
    assert "response.function_call_arguments.delta" in kinds
    assert kinds[-3:] == ["response.function_call_arguments.done", "response.output_item.done", "response.completed"]
    [call] = final.output
    assert call.type == "function_call"
    assert orjson.loads(call.arguments) == tool_arguments("the sky")


async def test_stored_retrieved_listed_deleted_and_store_false(serving: TestServer, fake: FakeAPI) -> None:
    async with sdk_for(serving) as client:
        made = await client.responses.create(model=DEPLOYMENT, input="the sky")
        assert (await client.responses.retrieve(made.id)).output_text == made.output_text
        items = await client.responses.input_items.list(made.id)
        assert [item.type for item in items.data] == ["message"]
        await client.responses.delete(made.id)
        with pytest.raises(openai.NotFoundError):
            await client.responses.retrieve(made.id)
        assert not fake.holds(made.id)  # an upstream that stored it (a native one) deleted it too
        unstored = await client.responses.create(model=DEPLOYMENT, input="the sky", store=False)
        with pytest.raises(openai.NotFoundError):
            await client.responses.retrieve(unstored.id)
        assert not fake.holds(unstored.id)


async def test_another_keys_id_is_404(start_gateway: StartGateway, fake: FakeAPI) -> None:
    secrets = {"a": "sk-a-0123456789abcdef", "b": "sk-b-0123456789abcdef"}
    gateway = await start_gateway(keys=secrets)
    url = str(gateway.make_url("/v1"))
    async with (
        openai.AsyncOpenAI(base_url=url, api_key=secrets["a"], max_retries=0) as owner,
        openai.AsyncOpenAI(base_url=url, api_key=secrets["b"], max_retries=0) as other,
    ):
        made = await owner.responses.create(model=DEPLOYMENT, input="the sky")
        calls = len(fake.received)
        for attempt in (
            other.responses.retrieve(made.id),
            other.responses.input_items.list(made.id),
            other.responses.delete(made.id),
            other.responses.create(model=DEPLOYMENT, input="more", previous_response_id=made.id),
        ):
            with pytest.raises(openai.NotFoundError):
                await attempt
        assert len(fake.received) == calls  # nothing of another key's reached the upstream
        assert (await owner.responses.retrieve(made.id)).output_text == made.output_text


# The chat parameter a deployment type cannot honour, as a Responses body sends it.
UNHONOURED: dict[str, tuple[str, dict[str, Any]]] = {
    "response_format": ("text.format", {"text": {"format": {"type": "json_object"}}}),
    "logprobs": ("top_logprobs", {"top_logprobs": 2}),
}


async def test_what_a_deployment_cannot_honour_is_a_400_naming_the_field_and_the_deployment(
    serving: TestServer, case: ProviderCase
) -> None:
    if case.chat_unsupported is None or case.chat_unsupported[0] not in UNHONOURED:
        pytest.skip(f"{case.type} honours every bridged field")
    field, body = UNHONOURED[case.chat_unsupported[0]]
    async with sdk_for(serving) as client:
        with pytest.raises(openai.BadRequestError) as refused:
            await client.responses.create(model=DEPLOYMENT, input="the sky", **body)
    assert refused.value.param == field
    assert f"'{field}'" in refused.value.message
    assert f"'{DEPLOYMENT}'" in refused.value.message
