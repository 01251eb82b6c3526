"""`POST /v1/messages` through the one pipeline: input guardrails read every text of the Messages
body as the upstream receives it (system, tool descriptions and schemas, tool inputs and results,
documents) and a deny is Anthropic's error; output guardrails read thinking and text; the cache
serves a repeat without an upstream call and replays a stream as Anthropic's events; the estimate
counts what is sent (tpm); metrics and the access log name the API `messages`; `apis:` narrowing
and budgets answer in Anthropic's shape."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import orjson
import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer

from tests.conftest import GatewayFactory, deployment
from tests.support.fake_upstream import FakeUpstream, chat_stream, status
from tests.support.observability_helpers import log_lines, scrape, value

SSN = "536-22-8471"
SAYS = f"SSN {SSN}"
Json = dict[str, Any]


def ask(**fields: Any) -> Json:
    return {"model": "fake", "max_tokens": 20, "messages": [{"role": "user", "content": "hello"}], **fields}


async def post(http: ClientSession, gateway: TestServer, body: Json) -> tuple[int, Json, dict[str, str]]:
    async with http.post(gateway.make_url("/v1/messages"), json=body) as response:
        return response.status, orjson.loads(await response.read()), dict(response.headers)


async def post_stream(http: ClientSession, gateway: TestServer, body: Json) -> tuple[list[str], str, dict[str, str]]:
    async with http.post(gateway.make_url("/v1/messages"), json={**body, "stream": True}) as response:
        raw = (await response.read()).decode()
        headers = dict(response.headers)
    names = [line[len("event: ") :] for line in raw.splitlines() if line.startswith("event: ")]
    return names, raw, headers


TOOL: Json = {"name": "lookup", "description": "d", "input_schema": {"type": "object"}}
PLACES: dict[str, Json] = {
    "system": ask(system=[{"type": "text", "text": SAYS, "cache_control": {"type": "ephemeral"}}]),
    "tool description": ask(tools=[{**TOOL, "description": f"Find {SAYS}"}]),
    "tool schema": ask(tools=[{**TOOL, "input_schema": {"type": "object", "description": SAYS}}]),
    "tool input": ask(
        messages=[
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "lookup", "input": {"q": SAYS}}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]},
        ]
    ),
    "tool result": ask(
        messages=[
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": SAYS}]}],
            }
        ]
    ),
    "document": ask(
        messages=[
            {
                "role": "user",
                "content": [{"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": SAYS}}],
            }
        ]
    ),
}


@pytest.fixture
async def guarded(make_gateway: GatewayFactory, upstream: FakeUpstream) -> TestServer:
    fake = deployment("fake", upstream.base_url, retries=0, policies=["pii"])
    checks = [{"check": "pii", "action": "deny"}]
    return await make_gateway({"deployments": [fake], "policies": {"pii": {"input": checks, "output": checks}}})


@pytest.mark.parametrize("place", list(PLACES))
async def test_an_input_guardrail_reads_every_text_and_denies_in_anthropics_shape(
    guarded: TestServer, upstream: FakeUpstream, http: ClientSession, place: str
) -> None:
    code, answer, _ = await post(http, guarded, PLACES[place])
    assert code == 400
    assert answer["type"] == "error"
    assert answer["error"]["type"] == "invalid_request_error"
    assert SSN not in answer["error"]["message"]
    assert not upstream.received


async def test_an_output_guardrail_reads_thinking_and_a_withheld_answer_is_a_refusal(
    guarded: TestServer, upstream: FakeUpstream, http: ClientSession
) -> None:
    message = {"role": "assistant", "content": "fine", "reasoning_content": f"the user's {SAYS}"}
    answer = {"id": "c", "model": "m", "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
    upstream.script(status(200, raw=orjson.dumps(answer)))
    code, body, _ = await post(http, guarded, ask())
    assert code == 200
    assert (body["stop_reason"], body["content"]) == ("refusal", [])
    assert SSN not in orjson.dumps(body).decode()


@pytest.fixture
async def cached(make_gateway: GatewayFactory, upstream: FakeUpstream, tmp_path: Path) -> TestServer:
    fake = deployment("fake", upstream.base_url, retries=0, policies=["cache"])
    config = {
        "deployments": [fake, {**deployment("chat-only", upstream.base_url), "apis": ["completions"]}],
        "policies": {"cache": {"cache": {}}},
        "observability": {"access_log": {"path": str(tmp_path / "access.log")}},
    }
    return await make_gateway(config)


async def test_a_repeat_is_one_upstream_call_and_a_stream_replays_as_events(
    cached: TestServer, upstream: FakeUpstream, http: ClientSession
) -> None:
    first = await post(http, cached, ask(temperature=0))
    again = await post(http, cached, ask(temperature=0))
    names, raw, headers = await post_stream(http, cached, ask(temperature=0))

    assert len(upstream.received) == 1
    assert (
        first[2]["x-gateway-cache-status"],
        again[2]["x-gateway-cache-status"],
        headers["x-gateway-cache-status"],
    ) == (
        "MISS",
        "HIT",
        "HIT",
    )
    assert again[1] == first[1]
    assert again[1]["content"] == [{"type": "text", "text": "echo: hello"}]
    assert names[0] == "message_start"
    assert names[-2:] == ["message_delta", "message_stop"]
    texts = [orjson.loads(line[6:])["delta"]["text"] for line in raw.splitlines() if "text_delta" in line]
    assert "".join(texts) == "echo: hello"


async def test_metrics_and_the_access_log_name_the_messages_api(
    cached: TestServer, http: ClientSession, tmp_path: Path
) -> None:
    code, _, _ = await post(http, cached, ask())
    assert code == 200
    scraped = await scrape(http, str(cached.make_url("/metrics")))
    labels = {"deployment": "fake", "status_class": "2xx", "api": "messages", "stream": "false"}
    assert value(scraped, "gateway_requests_total", **labels) == 1
    [line] = await log_lines(tmp_path / "access.log", 1)
    assert (line["api"], line["status"], line["deployment"]) == ("messages", 200, "fake")


async def test_a_deployment_narrowed_by_apis_is_a_clear_400(
    cached: TestServer, upstream: FakeUpstream, http: ClientSession
) -> None:
    code, body, _ = await post(http, cached, ask(model="chat-only"))
    assert code == 400
    assert body["error"]["type"] == "invalid_request_error"
    assert "chat-only" in body["error"]["message"]
    assert "apis" in body["error"]["message"]
    assert "/v1/messages is served through the chat API" in body["error"]["message"]
    assert not upstream.received


async def test_tpm_counts_everything_sent_and_refuses_in_anthropics_shape(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession
) -> None:
    gateway = await make_gateway({"deployments": [deployment("fake", upstream.base_url, limits={"tpm": 200})]})
    big_tool = {**TOOL, "description": "word " * 400}  # the tools are sent: they count
    code, body, _ = await post(http, gateway, ask(tools=[big_tool]))
    assert code == 429
    assert body["error"]["type"] == "rate_limit_error"
    assert not upstream.received


async def test_a_spent_budget_is_a_rate_limit_error(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession
) -> None:
    config = {
        "deployments": [deployment("fake", upstream.base_url)],
        "keys": [{"name": "team", "key": "${TEAM}", "budget": {"tokens": 40, "period": "1d"}}],
    }
    gateway = await make_gateway(config, {"TEAM": "gw-budget-key-0123456789abcdef"})
    headers = {"x-api-key": "gw-budget-key-0123456789abcdef", "anthropic-version": "2023-06-01"}
    statuses = []
    for _ in range(6):
        async with http.post(gateway.make_url("/v1/messages"), json=ask(max_tokens=5), headers=headers) as response:
            statuses.append(response.status)
            last = orjson.loads(await response.read())
    assert statuses[0] == 200
    assert statuses[-1] == 429
    assert last["error"]["type"] == "rate_limit_error"


async def test_an_output_guardrail_on_a_stream_ends_it_as_a_refusal(
    guarded: TestServer, upstream: FakeUpstream, http: ClientSession
) -> None:
    upstream.script(
        chat_stream([{"role": "assistant", "content": ""}, {"content": "the number is "}, {"content": SAYS}])
    )
    names, raw, _ = await post_stream(http, guarded, ask())
    assert SSN not in raw
    assert names[0] == "message_start"
    assert names[-2:] == ["message_delta", "message_stop"]
    [delta] = [orjson.loads(line[6:]) for line in raw.splitlines() if '"message_delta"' in line]
    assert delta["delta"]["stop_reason"] == "refusal"


async def test_a_body_over_the_limit_is_anthropics_413(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession
) -> None:
    config = {"server": {"max_body_bytes": 2048}, "deployments": [deployment("fake", upstream.base_url)]}
    gateway = await make_gateway(config)
    code, body, _ = await post(http, gateway, ask(system="x" * 4096))
    assert code == 413
    assert body["error"]["type"] == "request_too_large"
    assert not upstream.received


async def raw_post(gateway: TestServer, header: bytes) -> tuple[int, Json]:
    """A POST /v1/messages with a header no client library would send (bytes that are not UTF-8)."""
    reader, writer = await asyncio.open_connection(gateway.host, gateway.port)
    body = orjson.dumps(ask())
    head = b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n"
    writer.write(head + header + b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    answer = await reader.read()
    writer.close()
    status_line, _, rest = answer.partition(b"\r\n")
    return int(status_line.split()[1]), orjson.loads(rest.partition(b"\r\n\r\n")[2])


async def test_errors_before_the_handler_are_anthropic_shaped_too(cached: TestServer, http: ClientSession) -> None:
    async with http.get(cached.make_url("/v1/messages")) as response:
        wrong_method = (response.status, orjson.loads(await response.read()))
    async with http.post(cached.make_url("/v1/messages/unknown"), json=ask()) as response:
        unknown = (response.status, orjson.loads(await response.read()))
    bad_header = await raw_post(cached, b"x-api-key: k\xffey")
    async with http.get(cached.make_url("/v1/chat/completions")) as response:
        chat = orjson.loads(await response.read())

    assert wrong_method == (405, {"type": "error", "error": {"type": "invalid_request_error", "message": ANY}})
    assert unknown[0] == 404
    assert unknown[1]["error"]["type"] == "not_found_error"
    assert bad_header[0] == 400
    assert bad_header[1]["type"] == "error"
    assert bad_header[1]["error"]["message"] == "Invalid x-api-key header: its value is not valid UTF-8."
    assert "param" in chat["error"]  # OpenAI's envelope elsewhere


async def test_what_a_chat_upstream_is_not_sent_is_named_never_dropped_in_silence(
    cached: TestServer, upstream: FakeUpstream, http: ClientSession, tmp_path: Path
) -> None:
    anthropic_only = {
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "context_management": {"edits": []},
        "output_config": {"effort": "high"},
    }
    code, _, headers = await post(http, cached, ask(**anthropic_only))
    names, _, stream_headers = await post_stream(http, cached, ask(**anthropic_only, temperature=0.5))
    plain = await post(http, cached, ask(thinking={"type": "disabled"}, temperature=0.7))

    named = "context_management,output_config,thinking"
    assert (code, headers.get("x-gateway-ignored-fields")) == (200, named)
    assert (names[-1], stream_headers.get("x-gateway-ignored-fields")) == ("message_stop", named)
    assert (plain[0], plain[2].get("x-gateway-ignored-fields")) == (200, None)  # nothing left out
    for sent in upstream.received:
        assert not {"thinking", "context_management", "output_config"} & set(sent.body)
    lines = await log_lines(tmp_path / "access.log", 3)
    assert [line.get("ignored_fields") for line in lines] == [named, named, None]
