"""`/v1/messages` on an `anthropic` deployment: native pass-through, against a loopback fake
Anthropic that records the bytes it is sent and answers scripted bytes.

The upstream gets the client's body as it came (model and credential replaced; `cache_control`,
`thinking` and signatures intact) with `anthropic-beta` (which a chat deployment never gets);
answers and streams come back byte for byte; and the pipeline still holds: input guardrails deny
before any call (a redaction takes the translated path, redacted), output guardrails read text,
thinking and tool input (a deny is a refusal), a guarded stream takes the translated path, and
`count_tokens` is Anthropic's own count."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anthropic
import orjson
import pytest
from aiohttp import ClientSession, web
from aiohttp.test_utils import TestServer
from hypothesis import given
from hypothesis import strategies as st
from multidict import CIMultiDict
from pytest_aiohttp import AiohttpServer

from gateway.api.messages.events import MessageEvents
from tests.conftest import GatewayFactory, deployment
from tests.fake_upstream import FakeUpstream
from tests.observability_helpers import log_lines

PROVIDER_KEY = "sk-ant-upstream-native-0123456789abcdef"
VIRTUAL_KEY = "sk-ant-virtual-team-0123456789abcdef"  # a virtual key's stored Anthropic credential
TEAM_KEY = "gw-team-native-0123456789abcdef"
SSN = "536-22-8471"
ADMIN_KEY = "adm-native-" + "0123456789abcdef" * 2
# Anthropic's way: cache reads at a tenth of the prompt price, writes at 1.25 times it.
PRICE = {"prompt_per_1m": 3.0, "completion_per_1m": 15.0, "cached_prompt_per_1m": 0.3, "cache_write_per_1m": 3.75}
BETA = "interleaved-thinking-2025-05-14,prompt-caching-2024-07-31"
WEATHER: Any = {
    "name": "get_weather",
    "description": "The weather in a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
# What only Anthropic acts on: cache_control on system and a tool result, thinking with an earlier
# turn's signed thinking block, tools.
BODY: Any = {
    "model": "claude",
    "max_tokens": 2048,
    "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
    "thinking": {"type": "enabled", "budget_tokens": 1024},
    "tools": [WEATHER],
    "messages": [
        {"role": "user", "content": "weather in Paris?"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Ask the tool.", "signature": "EqQBCkYIBxgCKkC0sig=="},
                {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Paris"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01",
                    "content": "sunny",
                    "cache_control": {"type": "ephemeral"},
                }
            ],
        },
    ],
}
USAGE = {"input_tokens": 3, "cache_creation_input_tokens": 11, "cache_read_input_tokens": 17, "output_tokens": 5}
# Anthropic's answer as it writes it (spaces, a field the gateway does not know): relayed byte for byte.
ANSWER = (
    b'{"id": "msg_up01", "type": "message", "role": "assistant", "model": "claude-up-1", "content": ['
    b'{"type": "thinking", "thinking": "It is sunny.", "signature": "ErUBCkYIsig2=="}, '
    b'{"type": "text", "text": "Sunny in Paris."}], "stop_reason": "end_turn", "stop_sequence": null, '
    b'"usage": ' + orjson.dumps(USAGE) + b', "container": null}'
)


def frame(kind: str, **data: Any) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps({"type": kind, **data}) + b"\n\n"


START = {"id": "msg_up02", "type": "message", "role": "assistant", "model": "claude-up-1", "content": []}
STREAM = b"".join(
    [
        frame("message_start", message={**START, "stop_reason": None, "stop_sequence": None, "usage": USAGE}),
        frame("content_block_start", index=0, content_block={"type": "thinking", "thinking": "", "signature": ""}),
        frame("ping"),
        frame("content_block_delta", index=0, delta={"type": "thinking_delta", "thinking": "It is sunny."}),
        frame("content_block_delta", index=0, delta={"type": "signature_delta", "signature": "ErUBCkYIsig2=="}),
        frame("content_block_stop", index=0),
        frame("content_block_start", index=1, content_block={"type": "text", "text": ""}),
        frame("content_block_delta", index=1, delta={"type": "text_delta", "text": "Sunny in Paris."}),
        frame("content_block_stop", index=1),
        frame("message_delta", delta={"stop_reason": "end_turn", "stop_sequence": None}, usage={"output_tokens": 5}),
        frame("message_stop"),
    ]
)


@dataclass
class Seen:
    path: str
    headers: CIMultiDict[str]
    raw: bytes

    @property
    def body(self) -> Any:
        return orjson.loads(self.raw)


@dataclass
class Anthropic:
    """Records each request's bytes; answers the scripted (status, content type, bytes), else `ANSWER`."""

    seen: list[Seen] = field(default_factory=list)
    answers: deque[tuple[int, str, bytes]] = field(default_factory=deque)
    base_url: str = ""

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/messages", self.handle)
        app.router.add_post("/v1/messages/count_tokens", self.handle)
        return app

    gate: asyncio.Event = field(default_factory=asyncio.Event)  # `rest` waits for it
    rest: bytes = b""  # sent after the scripted answer once `gate` is set: a stream's later events

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.seen.append(Seen(request.path, CIMultiDict(request.headers), await request.read()))
        status, kind, body = self.answers.popleft() if self.answers else (200, "application/json", ANSWER)
        if not self.rest:
            return web.Response(status=status, body=body, content_type=kind)
        response = web.StreamResponse(status=status, headers={"content-type": kind})
        await response.prepare(request)
        await response.write(body)
        await self.gate.wait()
        await response.write(self.rest)
        await response.write_eof()
        return response

    def answer(self, body: bytes, kind: str = "application/json", status: int = 200) -> None:
        self.answers.append((status, kind, body))


@pytest.fixture
async def fake(aiohttp_server: AiohttpServer) -> Anthropic:
    fake = Anthropic()
    fake.base_url = str((await aiohttp_server(fake.app())).make_url("")).rstrip("/")
    return fake


@pytest.fixture
async def gateway(make_gateway: GatewayFactory, fake: Anthropic, upstream: FakeUpstream, tmp_path: Path) -> TestServer:
    provider = {"type": "anthropic", "base_url": fake.base_url, "model": "claude-up", "api_key": "${K}"}

    def claude(name: str, *policies: str) -> dict[str, Any]:
        return {"name": name, "provider": provider, "retries": 0, **({"policies": list(policies)} if policies else {})}

    config = {
        "deployments": [
            claude("claude"),
            claude("guard-in", "deny-in"),
            claude("guard-redact", "redact-in"),
            claude("guard-cap", "cap-in"),
            claude("guard-out", "deny-out"),
            deployment("chat", upstream.base_url, retries=0),
            {**claude("priced"), "price": PRICE},
        ],
        "policies": {
            "deny-in": {"input": [{"check": "pii", "action": "deny"}]},
            "redact-in": {"input": [{"check": "pii", "action": "redact"}]},
            "cap-in": {"input": [{"check": "length", "max_completion_tokens": 100, "action": "redact"}]},
            "deny-out": {"output": [{"check": "pii", "action": "deny"}]},
        },
        "keys": [
            {
                "name": "team",
                "key": "${TEAM}",
                "budget": {"cost_usd": 1.0, "period": "1d"},
                "virtual_keys": ["team-ant"],
            }
        ],
        "virtual_keys": [{"name": "team-ant", "provider": "anthropic", "api_key": "${VK}"}],
        "admin": {"key": "${ADMIN}"},
        "observability": {"access_log": {"path": str(tmp_path / "access.log")}},
    }
    return await make_gateway(config, {"K": PROVIDER_KEY, "TEAM": TEAM_KEY, "ADMIN": ADMIN_KEY, "VK": VIRTUAL_KEY})


@pytest.fixture
async def sdk(gateway: TestServer) -> AsyncIterator[anthropic.AsyncAnthropic]:
    async with anthropic.AsyncAnthropic(base_url=str(gateway.make_url("")), api_key=TEAM_KEY, max_retries=0) as client:
        yield client


HEADERS = {"x-api-key": TEAM_KEY, "anthropic-version": "2023-06-01", "anthropic-beta": BETA}


async def post(http: ClientSession, gateway: TestServer, body: Any, path: str = "/v1/messages") -> tuple[int, bytes]:
    raw = body if isinstance(body, bytes) else orjson.dumps(body)
    headers = {**HEADERS, "content-type": "application/json"}
    async with http.post(gateway.make_url(path), data=raw, headers=headers) as response:
        return response.status, await response.read()


def native(body: Any, model: str = "claude-up") -> bytes:
    """What the upstream must receive: the client's bytes with the model replaced in place."""
    return orjson.dumps({**body, "model": model})


async def test_the_upstream_gets_the_body_as_sent_and_the_answer_comes_back_as_it_came(
    gateway: TestServer, fake: Anthropic, http: ClientSession
) -> None:
    status, answer = await post(http, gateway, BODY)

    assert status == 200
    assert answer == ANSWER  # byte for byte: spacing, the unknown field, the signature
    [seen] = fake.seen
    assert seen.raw == native(BODY)
    assert seen.headers["x-api-key"] == PROVIDER_KEY  # the deployment's credential, not the gateway key
    assert TEAM_KEY not in str(dict(seen.headers))
    assert seen.headers["anthropic-beta"] == BETA
    assert seen.headers["anthropic-version"] == "2023-06-01"


async def test_the_sdk_round_trip_keeps_thinking_and_signatures(sdk: anthropic.AsyncAnthropic, fake: Anthropic) -> None:
    message = await sdk.messages.create(**BODY, extra_headers={"anthropic-beta": BETA})

    thinking, text = message.content
    assert thinking.type == "thinking"
    assert thinking.signature == "ErUBCkYIsig2=="
    assert text.type == "text"
    assert text.text == "Sunny in Paris."
    assert message.usage.cache_creation_input_tokens == 11
    assert message.usage.cache_read_input_tokens == 17
    [seen] = fake.seen
    assert seen.body == {**BODY, "model": "claude-up"}
    assert seen.headers["anthropic-beta"] == BETA


async def test_the_beta_header_goes_to_anthropic_deployments_only(
    gateway: TestServer, upstream: FakeUpstream, http: ClientSession
) -> None:
    body = {"model": "chat", "max_tokens": 9, "messages": [{"role": "user", "content": "hi"}]}
    status, _ = await post(http, gateway, body)

    assert status == 200
    [seen] = upstream.received
    assert "anthropic-beta" not in seen.headers
    assert "messages" in seen.body
    assert "thinking" not in seen.body


async def test_a_stream_is_relayed_as_it_came(
    gateway: TestServer, fake: Anthropic, http: ClientSession, sdk: anthropic.AsyncAnthropic
) -> None:
    fake.answer(STREAM, "text/event-stream")
    status, raw = await post(http, gateway, {**BODY, "stream": True})

    assert status == 200
    assert raw == STREAM
    assert fake.seen[0].raw == native({**BODY, "stream": True})

    fake.answer(STREAM, "text/event-stream")
    async with sdk.messages.stream(**BODY, extra_headers={"anthropic-beta": BETA}) as stream:
        final = await stream.get_final_message()
    assert final.content[0].type == "thinking"
    assert final.content[0].signature == "ErUBCkYIsig2=="
    assert (final.usage.cache_read_input_tokens, final.usage.output_tokens) == (17, 5)


async def test_an_error_event_mid_stream_is_an_anthropic_error_event(
    gateway: TestServer, fake: Anthropic, http: ClientSession
) -> None:
    head = STREAM.split(frame("content_block_stop", index=0))[0]
    fake.answer(head, "text/event-stream")
    fake.rest = frame("error", error={"type": "overloaded_error", "message": "Overloaded"})
    url, headers = gateway.make_url("/v1/messages"), {**HEADERS, "content-type": "application/json"}
    async with http.post(url, data=orjson.dumps({**BODY, "stream": True}), headers=headers) as response:
        first = await response.content.readany()  # the stream has begun: the client has events
        fake.gate.set()
        raw = first + await response.read()

    assert response.status == 200
    assert raw.startswith(head)
    tail = raw[len(head) :]
    assert tail.startswith(b"event: error\n")
    assert orjson.loads(tail.split(b"data: ", 1)[1])["type"] == "error"


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


async def test_a_guarded_stream_takes_the_translated_path_and_is_guarded(
    gateway: TestServer, fake: Anthropic, http: ClientSession
) -> None:
    leaking = STREAM.replace(b"Sunny in Paris.", SSN.encode())
    fake.answer(leaking, "text/event-stream")
    status, raw = await post(http, gateway, {**BODY, "model": "guard-out", "stream": True})

    assert status == 200
    assert SSN.encode() not in raw
    assert b"event: message_stop" in raw
    assert "thinking" not in fake.seen[0].body  # translated: the stream guard reads chat chunks


async def test_count_tokens_is_anthropics_own_count(
    gateway: TestServer, fake: Anthropic, http: ClientSession, sdk: anthropic.AsyncAnthropic
) -> None:
    fake.answer(b'{"input_tokens": 4242}')
    body = {key: value for key, value in BODY.items() if key != "max_tokens"}
    status, raw = await post(http, gateway, body, "/v1/messages/count_tokens")

    assert (status, orjson.loads(raw)) == (200, {"input_tokens": 4242})
    [seen] = fake.seen
    assert seen.path == "/v1/messages/count_tokens"
    assert seen.raw == native(body)
    assert (seen.headers["x-api-key"], seen.headers["anthropic-beta"]) == (PROVIDER_KEY, BETA)

    fake.answer(b'{"input_tokens": 7}')
    counted = await sdk.messages.count_tokens(model="claude", messages=[{"role": "user", "content": "hi"}])
    assert counted.input_tokens == 7


async def test_count_tokens_uses_the_virtual_key_credential_the_call_would_use(
    gateway: TestServer, fake: Anthropic, http: ClientSession, sdk: anthropic.AsyncAnthropic
) -> None:
    fake.answer(ANSWER)
    fake.answer(b'{"input_tokens": 12}')
    virtual = {"x-gateway-virtual-key": "team-ant"}
    message = await sdk.messages.create(**BODY, extra_headers=virtual)
    counted = await sdk.messages.count_tokens(
        model="claude", messages=[{"role": "user", "content": "hi"}], extra_headers=virtual
    )

    assert (message.id, counted.input_tokens) == ("msg_up01", 12)
    call, count = fake.seen
    assert count.path == "/v1/messages/count_tokens"
    assert call.headers["x-api-key"] == count.headers["x-api-key"] == VIRTUAL_KEY
    with pytest.raises(anthropic.PermissionDeniedError):  # a virtual key the caller may not use
        await sdk.messages.count_tokens(
            model="claude", messages=[{"role": "user", "content": "hi"}], extra_headers={"x-gateway-virtual-key": "x"}
        )
    assert len(fake.seen) == 2


async def test_cache_reads_and_writes_are_priced_as_anthropic_prices_them_in_cost_and_budget(
    gateway: TestServer, fake: Anthropic, http: ClientSession, tmp_path: Path
) -> None:
    # 3 fresh x 3 + 11 written x 3.75 + 17 read x 0.3 + 5 x 15 = 130.35 USD per million tokens
    url, headers = gateway.make_url("/v1/messages"), {**HEADERS, "content-type": "application/json"}
    async with http.post(url, data=orjson.dumps({**BODY, "model": "priced"}), headers=headers) as response:
        assert response.status == 200
        assert response.headers["x-gateway-cost-usd"] == "0.00013035"
        assert await response.read() == ANSWER
    fake.answer(STREAM, "text/event-stream")  # the same usage, from the stream's own events
    status, raw = await post(http, gateway, {**BODY, "model": "priced", "stream": True})
    assert (status, raw) == (200, STREAM)

    admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
    async with http.get(gateway.make_url("/admin/keys/team/usage"), headers=admin) as response:
        spent = await response.json()
    assert spent["cost_usd"] == pytest.approx(2 * 130.35e-6, rel=1e-9)
    assert spent["tokens"] == 2 * (3 + 11 + 17 + 5)
    lines = await log_lines(tmp_path / "access.log", 3)  # the spend view adds the same figures
    plain, streamed = [line for line in lines if line["path"] == "/v1/messages"]
    assert (plain["api"], plain["cost_usd"]) == ("messages", pytest.approx(130.35e-6))
    assert (streamed["prompt_tokens"], streamed["completion_tokens"]) == (31, 5)
    assert streamed["cost_usd"] == pytest.approx(130.35e-6)


async def test_a_stream_cut_before_message_stop_ends_with_an_error_event(
    gateway: TestServer, fake: Anthropic, http: ClientSession
) -> None:
    head = STREAM.split(b"event: message_delta")[0]
    fake.answer(head, "text/event-stream")
    fake.rest = b" "  # then the upstream closes without message_stop
    url, headers = gateway.make_url("/v1/messages"), {**HEADERS, "content-type": "application/json"}
    async with http.post(url, data=orjson.dumps({**BODY, "stream": True}), headers=headers) as response:
        first = await response.content.readany()
        fake.gate.set()
        raw = first + await response.read()

    assert raw.startswith(head)
    assert raw[len(head) :].startswith(b"event: error\n")
    assert b"event: message_stop" not in raw


TEXT = st.text(st.characters(codec="utf-8"), max_size=40)
EVENTS = st.lists(
    st.one_of(
        st.builds(
            lambda t: {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}}, TEXT
        ),
        st.builds(
            lambda t: {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": t},
            },
            TEXT,
        ),
        st.builds(lambda t: {"type": t, "x": t}, TEXT),  # any type: an unknown one, a hostile one
    ),
    max_size=8,
)


@given(EVENTS)
def test_native_events_are_written_as_they_came_and_never_as_more_than_one_event(events: list[Any]) -> None:
    """Each event's data goes out as the upstream sent it, under its type as the event name, one
    `event:` and one `data:` line: no type or text (newlines, quotes, `data:` inside) can split it
    into more events or give it another name; an event whose type is no such name is left out."""
    payloads = [orjson.dumps(event) for event in events]
    out = MessageEvents([]).frames(payloads)

    named = [(event["type"], payload) for event, payload in zip(events, payloads, strict=True) if _named(event["type"])]
    assert out == b"".join(b"event: " + kind.encode() + b"\ndata: " + payload + b"\n\n" for kind, payload in named)


def _named(kind: str) -> bool:
    """What an Anthropic event type looks like (letters and underscores): the only names written."""
    return kind.isascii() and kind.replace("_", "").isalpha()


async def test_nothing_is_named_left_out_when_the_body_goes_as_it_came(
    gateway: TestServer, fake: Anthropic, http: ClientSession
) -> None:
    headers = {**HEADERS, "content-type": "application/json"}
    async with http.post(gateway.make_url("/v1/messages"), data=orjson.dumps(BODY), headers=headers) as response:
        assert response.status == 200
        assert "x-gateway-ignored-fields" not in response.headers  # `thinking` reached Anthropic
    [seen] = fake.seen
    assert seen.body["thinking"] == BODY["thinking"]
