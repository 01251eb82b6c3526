"""The `openai-agents` SDK through the gateway's `/v1/responses`: an Agent with a function tool runs
to its final output (OpenAIResponsesModel on an AsyncOpenAI client pointed at the gateway, tracing
off), against a loopback chat upstream that calls the tool, and against the mock."""

from __future__ import annotations

import pytest
from agents import Agent, ModelSettings, OpenAIResponsesModel, RunConfig, Runner, function_tool
from aiohttp.test_utils import TestServer

from tests.conftest import GatewayFactory
from tests.gateway.responses.test_responses_api import sdk
from tests.support.fake_upstream import FakeUpstream

CALLS: list[str] = []


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    CALLS.append(city)
    return f"sunny in {city}"


@pytest.fixture(autouse=True)
def _fresh_calls() -> None:
    CALLS.clear()


async def run_agent(gateway: TestServer, model: str, settings: ModelSettings | None = None) -> str:
    async with sdk(gateway) as client:
        agent = Agent(
            name="weather",
            instructions="Answer with the weather.",
            tools=[get_weather],
            model=OpenAIResponsesModel(model=model, openai_client=client),
            model_settings=settings or ModelSettings(),
        )
        result = await Runner.run(agent, "Weather in Paris?", run_config=RunConfig(tracing_disabled=True))
    return str(result.final_output)


async def test_an_agent_with_a_tool_runs_to_its_final_output_on_a_chat_upstream(
    gateway: TestServer, upstream: FakeUpstream
) -> None:
    final = await run_agent(gateway, "fake")
    assert CALLS == ["Paris"]
    assert final == "echo: sunny in Paris"
    second = upstream.received[1].body["messages"]
    assert second[-1] == {"role": "tool", "tool_call_id": "call_fake1", "content": "sunny in Paris"}


async def test_an_agent_with_a_tool_runs_to_its_final_output_on_the_mock(make_gateway: GatewayFactory) -> None:
    gateway = await make_gateway({"deployments": [{"name": "m", "provider": {"type": "mock"}}]})
    final = await run_agent(gateway, "m", ModelSettings(tool_choice="required"))
    assert len(CALLS) == 1
    assert final
