"""`/v1/responses` through the one pipeline: the output guardrails redact what the client receives
and what is stored (plain and streamed), the estimate behind limits and budgets counts the whole
conversation a previous_response_id rebuilds, cost, and the `responses` label of the metrics."""

from __future__ import annotations

from typing import Any

import openai
import pytest
from aiohttp import ClientSession

from tests.conftest import GatewayFactory, deployment
from tests.gateway.responses.test_responses_api import post, sdk
from tests.support.fake_upstream import FakeUpstream
from tests.support.observability_helpers import scrape, value

EMAIL = "jane.doe@example.com"


async def test_output_redaction_reaches_the_answer_the_events_and_the_store(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    fake = deployment("fake", upstream.base_url, retries=0, policies=["guarded"])
    policies = {"guarded": {"output": [{"check": "pii", "action": "redact"}]}}
    gateway = await make_gateway({"deployments": [fake], "policies": policies})
    async with sdk(gateway) as client:
        plain = await client.responses.create(model="fake", input=f"write to {EMAIL}")
        assert upstream.received[0].body["messages"][0]["content"] == f"write to {EMAIL}"  # input not guarded
        assert EMAIL not in plain.output_text
        assert EMAIL not in (await client.responses.retrieve(plain.id)).model_dump_json()

        async with client.responses.stream(model="fake", input=f"mail {EMAIL} now") as stream:
            events = [event async for event in stream]
            final = await stream.get_final_response()
        assert all(EMAIL not in event.model_dump_json(warnings=False) for event in events)
        assert EMAIL not in (await client.responses.retrieve(final.id)).model_dump_json()


async def test_the_estimate_counts_the_conversation_behind_previous_response_id(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    fake = deployment("fake", upstream.base_url, retries=0, limits={"tpm": 100})
    gateway = await make_gateway({"deployments": [fake]})
    async with sdk(gateway) as client:
        first = await client.responses.create(model="fake", input="word " * 40, max_output_tokens=16)  # ~50 tokens
        await client.responses.create(model="fake", input="hi", max_output_tokens=16)  # alone it fits
        with pytest.raises(openai.RateLimitError) as refused:
            await client.responses.create(model="fake", input="hi", previous_response_id=first.id, max_output_tokens=16)
    assert refused.value.code == "request_too_large"
    assert len(upstream.received) == 2


async def test_cost_and_the_responses_label_of_the_metrics(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession
) -> None:
    price = {"prompt_per_1m": 2.0, "completion_per_1m": 4.0}
    fake = deployment("fake", upstream.base_url, retries=0, price=price)
    gateway = await make_gateway({"deployments": [fake]})
    status, answer, headers = await post(http, gateway, {"model": "fake", "input": "one two"})
    assert status == 200
    assert answer["usage"]["input_tokens"] == 7
    assert headers["x-gateway-cost-usd"] == "0.000026"  # 7 x $2 + 3 x $4 per million
    scraped = await scrape(http, str(gateway.make_url("/metrics")))
    labels: dict[str, Any] = {"deployment": "fake", "status_class": "2xx", "api": "responses", "stream": "false"}
    assert value(scraped, "gateway_requests_total", **labels) == 1
