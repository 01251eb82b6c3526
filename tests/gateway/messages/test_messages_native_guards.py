"""Guardrails on `/v1/messages` native pass-through (an `anthropic` deployment), against the
loopback fake Anthropic (`tests.support.fake_anthropic`): the body goes as it came and the answer comes back
as it came, with the guardrails applied where they are.

In: a deny refuses before any call; a redaction (and a length cap's `max_tokens` clamp) is written
into the native body, `cache_control` and thinking intact. Out: the checks read a plain answer's
text, thinking and `tool_use` input (name too) and rewrite them in place, a deny being Anthropic's
`refusal`; on a stream the same texts go through the chat stream's guard as the events flow (held
back only where a pattern could complete), so a canary split over deltas never reaches the client,
in the raw bytes or in what the `anthropic` SDK assembles."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anthropic
import orjson
import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer
from pytest_aiohttp import AiohttpServer

from tests.conftest import GatewayFactory
from tests.support.fake_anthropic import ANSWER, BETA, BODY, START, USAGE, Anthropic, frame, native

PROVIDER_KEY = "sk-ant-upstream-guards-0123456789abcdef"
TEAM_KEY = "gw-team-guards-0123456789abcdef"
SSN = "536-22-8471"
HEADERS = {"x-api-key": TEAM_KEY, "anthropic-version": "2023-06-01", "anthropic-beta": BETA}


@pytest.fixture
async def fake(aiohttp_server: AiohttpServer) -> Anthropic:
    return await Anthropic.started(aiohttp_server)


@pytest.fixture
async def gateway(make_gateway: GatewayFactory, fake: Anthropic) -> TestServer:
    provider = {"type": "anthropic", "base_url": fake.base_url, "model": "claude-up", "api_key": "${K}"}

    def claude(name: str, policy: str) -> dict[str, Any]:
        return {"name": name, "provider": provider, "retries": 0, "policies": [policy]}

    config = {
        "deployments": [
            claude("guard-in", "deny-in"),
            claude("guard-redact", "redact-in"),
            claude("guard-cap", "cap-in"),
            claude("guard-out", "deny-out"),
            claude("mask-out", "redact-out"),
        ],
        "policies": {
            "deny-in": {"input": [{"check": "pii", "action": "deny"}]},
            "redact-in": {"input": [{"check": "pii", "action": "redact"}]},
            "cap-in": {"input": [{"check": "length", "max_completion_tokens": 100, "action": "redact"}]},
            "deny-out": {"output": [{"check": "pii", "action": "deny"}]},
            "redact-out": {"output": [{"check": "pii", "action": "redact"}]},
        },
        "keys": [{"name": "team", "key": "${TEAM}"}],
    }
    return await make_gateway(config, {"K": PROVIDER_KEY, "TEAM": TEAM_KEY})


@pytest.fixture
async def sdk(gateway: TestServer) -> AsyncIterator[anthropic.AsyncAnthropic]:
    async with anthropic.AsyncAnthropic(base_url=str(gateway.make_url("")), api_key=TEAM_KEY, max_retries=0) as client:
        yield client


async def post(http: ClientSession, gateway: TestServer, body: Any) -> tuple[int, bytes]:
    headers = {**HEADERS, "content-type": "application/json"}
    async with http.post(gateway.make_url("/v1/messages"), data=orjson.dumps(body), headers=headers) as response:
        return response.status, await response.read()


async def test_an_input_guardrail_denies_before_any_call(
    gateway: TestServer, fake: Anthropic, http: ClientSession
) -> None:
    body = {**BODY, "model": "guard-in", "system": f"My SSN is {SSN}."}
    status, answer = await post(http, gateway, body)

    assert status == 400
    assert orjson.loads(answer)["error"]["type"] == "invalid_request_error"
    assert fake.seen == []


async def test_an_input_redaction_is_written_into_the_native_body_which_keeps_the_rest_intact(
    gateway: TestServer, fake: Anthropic, http: ClientSession
) -> None:
    # The SSN where the chat view has it whole (a string turn, a tool result), and in pieces the
    # translation joins or re-encodes (two system blocks, a tool_use input as JSON arguments).
    system: list[dict[str, Any]] = [
        {"type": "text", "text": f"The customer's SSN is {SSN}.", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "Be brief."},
    ]
    turns = [
        {"role": "user", "content": f"My SSN is {SSN}, what is on file?"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Look it up.", "signature": "EqQBCkYIBxgCKkC0sig=="},
                {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": SSN}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01",
                    "content": f"record {SSN}",
                    "cache_control": {"type": "ephemeral"},
                }
            ],
        },
    ]
    body = {**BODY, "model": "guard-redact", "system": system, "messages": turns}
    status, _ = await post(http, gateway, body)

    assert status == 200
    [seen] = fake.seen
    assert SSN.encode() not in seen.raw
    redacted = orjson.loads(orjson.dumps(body).replace(SSN.encode(), b"[SSN]"))
    assert seen.raw == native(redacted)  # the rest as it came: cache_control, thinking, its signature
    assert seen.body["system"][0] == {**system[0], "text": "The customer's SSN is [SSN]."}
    assert seen.body["messages"][2]["content"][0]["cache_control"] == {"type": "ephemeral"}
    assert seen.headers["anthropic-beta"] == BETA


async def test_a_max_tokens_cap_is_written_into_the_native_body(
    gateway: TestServer, fake: Anthropic, http: ClientSession
) -> None:
    status, _ = await post(http, gateway, {**BODY, "model": "guard-cap"})

    assert status == 200
    [seen] = fake.seen
    assert seen.raw == native({**BODY, "max_tokens": 100}, "claude-up")  # the rest as it came


async def test_an_input_redaction_the_native_body_cannot_hold_is_refused(
    gateway: TestServer, fake: Anthropic, http: ClientSession
) -> None:
    call = {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {SSN: "Paris"}}
    turns = [*BODY["messages"][:1], {"role": "assistant", "content": [call]}, *BODY["messages"][2:]]
    status, answer = await post(http, gateway, {**BODY, "model": "guard-redact", "messages": turns})

    assert status == 400  # an object key cannot be rewritten: never sent as it came
    assert "messages[1].content[0].input" in orjson.loads(answer)["error"]["message"]
    assert SSN.encode() not in answer
    assert fake.seen == []


@pytest.mark.parametrize(
    "block",
    [
        {"type": "text", "text": f"Your SSN is {SSN}."},
        {"type": "thinking", "thinking": f"The SSN is {SSN}.", "signature": "sig"},
        {"type": "tool_use", "id": "toolu_9", "name": "get_weather", "input": {"city": SSN}},
    ],
    ids=["text", "thinking", "tool_use"],
)
async def test_an_output_guardrail_reads_every_block_and_refuses(
    gateway: TestServer, fake: Anthropic, http: ClientSession, block: dict[str, Any]
) -> None:
    answer = {**START, "content": [block], "stop_reason": "end_turn", "stop_sequence": None, "usage": USAGE}
    fake.answer(orjson.dumps(answer))
    status, raw = await post(http, gateway, {**BODY, "model": "guard-out"})

    assert status == 200
    assert SSN.encode() not in raw
    message = orjson.loads(raw)
    assert (message["type"], message["stop_reason"], message["content"]) == ("message", "refusal", [])
    assert fake.seen[0].raw == native({**BODY, "model": "guard-out"})  # the native body went


async def test_an_answer_the_output_guardrail_passes_comes_back_as_it_came(
    gateway: TestServer, fake: Anthropic, http: ClientSession
) -> None:
    status, raw = await post(http, gateway, {**BODY, "model": "guard-out"})

    assert (status, raw) == (200, ANSWER)


@pytest.mark.parametrize(
    ("block", "redacted"),
    [
        ({"type": "text", "text": f"Your SSN is {SSN}."}, {"type": "text", "text": "Your SSN is [SSN]."}),
        (
            {"type": "thinking", "thinking": f"The SSN is {SSN}.", "signature": "sig"},
            {"type": "thinking", "thinking": "The SSN is [SSN].", "signature": "sig"},
        ),
        (
            {"type": "tool_use", "id": "toolu_9", "name": "get_weather", "input": {"city": SSN}},
            {"type": "tool_use", "id": "toolu_9", "name": "get_weather", "input": {"city": "[SSN]"}},
        ),
    ],
    ids=["text", "thinking", "tool_use"],
)
async def test_an_output_redaction_rewrites_the_native_answer_where_it_is(
    gateway: TestServer, fake: Anthropic, http: ClientSession, block: dict[str, Any], redacted: dict[str, Any]
) -> None:
    answer = {**START, "content": [block], "stop_reason": "end_turn", "stop_sequence": None, "usage": USAGE}
    fake.answer(orjson.dumps({**answer, "container": None}))  # a field the gateway does not know
    status, raw = await post(http, gateway, {**BODY, "model": "mask-out"})

    assert status == 200
    assert SSN.encode() not in raw
    assert orjson.loads(raw) == {**answer, "content": [redacted], "container": None}  # the rest as it came
    assert fake.seen[0].raw == native({**BODY, "model": "mask-out"})


def streamed(kind: str) -> bytes:
    """An Anthropic stream whose first block (of `kind`) carries the SSN split over two deltas,
    followed by a clean text block."""
    head, tail = f"the SSN is {SSN[:5]}", f"{SSN[5:]}. Done."
    deltas: list[dict[str, Any]]
    if kind == "text":
        first: dict[str, Any] = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": head}, {"type": "text_delta", "text": tail}]
    elif kind == "thinking":
        first = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [{"type": "thinking_delta", "thinking": head}, {"type": "thinking_delta", "thinking": tail}]
        deltas.append({"type": "signature_delta", "signature": "sig=="})
    else:
        first = {"type": "tool_use", "id": "toolu_9", "name": "get_weather", "input": {}}
        pieces = ['{"city": "', SSN[:5], SSN[5:] + '"}']
        deltas = [{"type": "input_json_delta", "partial_json": piece} for piece in pieces]
    message = {**START, "stop_reason": None, "stop_sequence": None, "usage": USAGE}
    return b"".join(
        [
            frame("message_start", message=message),
            frame("content_block_start", index=0, content_block=first),
            *(frame("content_block_delta", index=0, delta=delta) for delta in deltas),
            frame("content_block_stop", index=0),
            frame("content_block_start", index=1, content_block={"type": "text", "text": ""}),
            frame("content_block_delta", index=1, delta={"type": "text_delta", "text": "Anything else?"}),
            frame("content_block_stop", index=1),
            frame(
                "message_delta", delta={"stop_reason": "end_turn", "stop_sequence": None}, usage={"output_tokens": 9}
            ),
            frame("message_stop"),
        ]
    )


KINDS = ["text", "thinking", "tool_use"]


@pytest.mark.parametrize("kind", KINDS)
async def test_a_denied_stream_stops_before_the_canary_and_withholds_the_rest(
    gateway: TestServer, fake: Anthropic, http: ClientSession, sdk: anthropic.AsyncAnthropic, kind: str
) -> None:
    fake.answer(streamed(kind), "text/event-stream")
    status, raw = await post(http, gateway, {**BODY, "model": "guard-out", "stream": True})

    assert status == 200
    assert SSN[:5].encode() not in raw  # held back from the first delta on: no piece of it went out
    assert SSN[5:].encode() not in raw
    assert b"Anything else?" not in raw
    assert fake.seen[0].raw == native({**BODY, "model": "guard-out", "stream": True})  # native, not translated

    fake.answer(streamed(kind), "text/event-stream")
    async with sdk.messages.stream(**{**BODY, "model": "guard-out"}) as stream:
        final = await stream.get_final_message()
    assert final.stop_reason == "refusal"
    assert (final.usage.output_tokens, final.usage.cache_read_input_tokens) == (9, 17)  # Anthropic's own
    assert len(final.content) == 1
    assert SSN not in final.model_dump_json()


@pytest.mark.parametrize("kind", KINDS)
async def test_a_redacted_stream_is_rewritten_as_it_flows(
    gateway: TestServer, fake: Anthropic, http: ClientSession, sdk: anthropic.AsyncAnthropic, kind: str
) -> None:
    fake.answer(streamed(kind), "text/event-stream")
    status, raw = await post(http, gateway, {**BODY, "model": "mask-out", "stream": True})

    assert status == 200
    assert SSN[5:].encode() not in raw
    assert b"[SSN]" in raw
    assert fake.seen[0].raw == native({**BODY, "model": "mask-out", "stream": True})  # native, not translated

    fake.answer(streamed(kind), "text/event-stream")
    async with sdk.messages.stream(**{**BODY, "model": "mask-out"}) as stream:
        final = await stream.get_final_message()
    first, second = final.content
    if first.type == "text":
        assert first.text == "the SSN is [SSN]. Done."
    elif first.type == "thinking":
        assert (first.thinking, first.signature) == ("the SSN is [SSN]. Done.", "sig==")
    else:
        assert first.type == "tool_use"
        assert first.input == {"city": "[SSN]"}
    assert second.type == "text"
    assert second.text == "Anything else?"
    assert final.stop_reason == "end_turn"
