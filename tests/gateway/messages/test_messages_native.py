"""`/v1/messages` on an `anthropic` deployment: native pass-through, against a loopback fake
Anthropic (`tests.support.fake_anthropic`) that records the bytes it is sent and answers scripted bytes.

The upstream gets the client's body as it came (model and credential replaced; `cache_control`,
`thinking` and signatures intact) with `anthropic-beta` (which a chat deployment never gets);
answers and streams come back byte for byte; usage and cost are Anthropic's own; `count_tokens` is
Anthropic's own count, with the credential the call would use. The guardrails on this path:
`test_messages_native_guards`; the cache: `test_messages_native_cache`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anthropic
import orjson
import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer
from hypothesis import given
from hypothesis import strategies as st
from pytest_aiohttp import AiohttpServer

from gateway.api.messages.events import MessageEvents
from tests.conftest import GatewayFactory, deployment
from tests.support.fake_anthropic import ANSWER, BETA, BODY, STREAM, Anthropic, frame, native
from tests.support.fake_upstream import FakeUpstream
from tests.support.observability_helpers import log_lines

PROVIDER_KEY = "sk-ant-upstream-native-0123456789abcdef"
VIRTUAL_KEY = "sk-ant-virtual-team-0123456789abcdef"  # a virtual key's stored Anthropic credential
TEAM_KEY = "gw-team-native-0123456789abcdef"
SSN = "536-22-8471"
ADMIN_KEY = "adm-native-" + "0123456789abcdef" * 2
# Anthropic's way: cache reads at a tenth of the prompt price, writes at 1.25 times it.
PRICE = {"prompt_per_1m": 3.0, "completion_per_1m": 15.0, "cached_prompt_per_1m": 0.3, "cache_write_per_1m": 3.75}


@pytest.fixture
async def fake(aiohttp_server: AiohttpServer) -> Anthropic:
    return await Anthropic.started(aiohttp_server)


@pytest.fixture
async def gateway(make_gateway: GatewayFactory, fake: Anthropic, upstream: FakeUpstream, tmp_path: Path) -> TestServer:
    provider = {"type": "anthropic", "base_url": fake.base_url, "model": "claude-up", "api_key": "${K}"}

    def claude(name: str, *policies: str) -> dict[str, Any]:
        return {"name": name, "provider": provider, "retries": 0, **({"policies": list(policies)} if policies else {})}

    config = {
        "deployments": [
            claude("claude"),
            deployment("chat", upstream.base_url, retries=0),
            {**claude("priced"), "price": PRICE},
        ],
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
