"""The mock provider's bounds: it is the shipped config's first deployment, open with no keys, so a
request must neither multiply its work past the local engine's bounds (a 400 naming the field)
nor hold the event loop for the other requests with the work the bounds leave."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import openai
import pytest
from aiohttp.test_utils import TestServer

from providers import mock
from providers.base import UpstreamRequest
from providers.mock import MockOptions, MockProvider
from tests.conftest import GatewayFactory

SAFETY_S = 10.0  # what a test waits at most for what must happen, before it fails instead of hanging
REPLY = " ".join(["word"] * 4_000)  # a sample that runs to max_tokens 4000


@pytest.fixture
async def gateway(make_gateway: GatewayFactory) -> TestServer:
    deployments = [
        {"name": "mock", "retries": 0, "timeout_s": 30, "provider": {"type": "mock"}},
        {"name": "long", "retries": 0, "timeout_s": 30, "provider": {"type": "mock", "reply": REPLY}},
        {
            "name": "small",
            "retries": 0,
            "provider": {"type": "mock", "max_sequences_per_request": 2, "max_tokens_per_request": 100},
        },
    ]
    return await make_gateway({"deployments": deployments})


@pytest.fixture
async def client(gateway: TestServer) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(base_url=str(gateway.make_url("/v1")), api_key="unused", max_retries=0) as sdk:
        yield sdk


async def refusal(gateway: TestServer, path: str, body: dict[str, Any]) -> tuple[int, str, str]:
    """Status, code and param of a request's answer (the SDK's own checks take seconds over 300k ids)."""
    async with aiohttp.ClientSession() as session, session.post(gateway.make_url(path), json=body) as answer:
        error = (await answer.json())["error"]
        return answer.status, error["code"], error["param"]


def function_with(properties: int) -> dict[str, Any]:
    schema = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(properties)}}
    return {"type": "function", "function": {"name": "f", "parameters": schema}}


COMPLETIONS_PAST_THE_BOUNDS = [
    pytest.param({"prompt": ["a b c"] * 2_000, "n": 128}, "prompt", id="2000-prompts-n-128"),
    pytest.param({"prompt": "a b c", "n": 65}, "n", id="n-65"),
    pytest.param({"prompt": ["a"] * 4, "best_of": 20}, "best_of", id="4-prompts-best_of-20"),
    pytest.param({"prompt": "a", "n": 64, "max_tokens": 5_000}, "max_tokens", id="max_tokens-times-n"),
    pytest.param({"prompt": "a " * 300_000}, "prompt", id="prompt-of-300k-words"),
    pytest.param({"prompt": [1] * 300_000}, "prompt", id="prompt-of-300k-ids"),
    pytest.param({"prompt": "a " * 5_000, "n": 64, "echo": True}, "prompt", id="echoed-64-times"),
]


@pytest.mark.parametrize(("request_fields", "param"), COMPLETIONS_PAST_THE_BOUNDS)
async def test_a_completions_request_past_the_bounds_is_a_400_naming_the_field(
    gateway: TestServer, request_fields: dict[str, Any], param: str
) -> None:
    body = {"model": "mock", **request_fields}
    assert await refusal(gateway, "/v1/completions", body) == (400, "request_too_large", param)


CHAT_PAST_THE_BOUNDS = [
    pytest.param({"n": 65}, "n", id="n-65"),
    pytest.param({"n": 64, "max_completion_tokens": 5_000}, "max_completion_tokens", id="max_completion_tokens"),
    pytest.param({"n": 64, "max_tokens": 5_000}, "max_completion_tokens", id="max_tokens"),
    pytest.param({"messages": [{"role": "user", "content": "a " * 300_000}]}, "messages", id="300k-words"),
]


@pytest.mark.parametrize(("request_fields", "param"), CHAT_PAST_THE_BOUNDS)
async def test_a_chat_request_past_the_bounds_is_a_400_naming_the_field(
    gateway: TestServer, request_fields: dict[str, Any], param: str
) -> None:
    body = {"model": "mock", "messages": [{"role": "user", "content": "hello"}], **request_fields}
    assert await refusal(gateway, "/v1/chat/completions", body) == (400, "request_too_large", param)


async def test_tool_calls_count_against_the_tokens_bound(gateway: TestServer) -> None:
    """A call's arguments grow with its function's schema, which max_completion_tokens does not
    bound: n calls of a large schema are counted as they are drawn, and refused past the bound."""
    body = {"model": "small", "messages": [{"role": "user", "content": "hi"}], "tool_choice": "required"}
    assert await refusal(gateway, "/v1/chat/completions", {**body, "tools": [function_with(30)]}) == (
        400,
        "request_too_large",
        "tools",
    )
    many = {**body, "tools": [function_with(8)], "n": 2}
    assert await refusal(gateway, "/v1/chat/completions", many) == (400, "request_too_large", "n")


async def test_the_bounds_are_the_deployments_settings(client: openai.AsyncOpenAI) -> None:
    assert len((await client.completions.create(model="small", prompt="a", n=2, max_tokens=40)).choices) == 2
    with pytest.raises(openai.BadRequestError, match="at most 2") as refused:
        await client.completions.create(model="small", prompt="a", n=3, max_tokens=1)
    assert refused.value.param == "n"
    with pytest.raises(openai.BadRequestError, match="more than 100 tokens") as refused:
        await client.chat.completions.create(
            model="small", messages=[{"role": "user", "content": "a"}], n=2, max_completion_tokens=50
        )
    assert refused.value.param == "max_completion_tokens"


async def test_a_request_at_the_bounds_leaves_the_event_loop_to_the_others(
    client: openai.AsyncOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """64 prompts of 4,000 tokens each: once its samples are being drawn, a small request to the
    same deployment is sent, and the drawing waits until that one was answered, which can only
    happen if the drawing does not hold the loop (it would wait out SAFETY_S otherwise)."""
    drawing, answered = threading.Event(), threading.Event()
    waits: list[bool] = []
    generate = mock._generate

    def gated(key: tuple[Any, ...], *args: Any) -> Any:
        if not waits and "gate" in key[0]:
            drawing.set()
            waits.append(answered.wait(SAFETY_S))
        return generate(key, *args)

    monkeypatch.setattr(mock, "_generate", gated)
    large = asyncio.create_task(client.completions.create(model="long", prompt=["gate"] * 64, max_tokens=4_000))
    assert await asyncio.to_thread(drawing.wait, SAFETY_S)
    small = await client.completions.create(model="long", prompt="hello", max_tokens=5)
    answered.set()
    completion = await large

    assert waits == [True]
    assert small.choices[0].text.split() == ["word"] * 5
    assert len(completion.choices) == 64
    assert completion.usage is not None
    assert completion.usage.completion_tokens == 64 * 4_000


async def test_a_large_stream_lets_the_loop_serve_others_between_its_steps() -> None:
    """A reader that never waits (its writes all fit a buffer) would take a whole stream in one
    turn of the loop: the stream yields every few hundred chunks."""
    provider = MockProvider("mock", MockOptions(reply=REPLY))
    body = {"model": "mock", "prompt": ["a"] * 64, "max_tokens": 40, "stream": True}
    stream = await provider.stream(UpstreamRequest(body, "req", 30.0, api="completions"))
    order: list[str] = []

    async def read() -> None:
        chunks = 0
        async for payloads in stream:
            chunks += len(payloads)
        order.append(f"stream of {chunks} chunks")

    async def other() -> None:
        order.append("other")

    await asyncio.gather(read(), other())
    await provider.aclose()
    assert order == ["other", "stream of 2560 chunks"]
