"""Output guardrails read every text of a choice the client receives: content, refusal, reasoning
(`reasoning_content`, `reasoning`), tool-call and legacy `function_call` arguments (as the JSON they
spell: `\\u0036` is a 6) and names, and any string of a field the gateway does not know, on the
choice, its message or its delta, plain and streamed (held back across chunk borders), for chat
and completions. A canary SSN under a `pii` deny policy must never reach the client, read as an
SDK reads it (stream deltas joined, arguments parsed as JSON); a redaction keeps arguments JSON.
All through real HTTP on loopback, with a scripted upstream."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
from typing import Any

import orjson
import pytest
from aiohttp import ClientSession, web
from aiohttp.test_utils import TestServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import GatewayFactory, deployment
from tests.support.fake_upstream import Behaviour, FakeUpstream

Json = dict[str, Any]
CANARY = "536-22-8479"  # an SSN the `pii` check finds
SAY = f"the number is {CANARY} ok"
ESCAPED = "".join(f"\\u{ord(c):04x}" for c in CANARY)  # the canary as JSON escapes, every character
DENY = {"check": "pii", "entities": ["ssn"], "action": "deny"}
REDACT = {"check": "pii", "entities": ["ssn"], "action": "redact"}
FUZZ = settings(
    max_examples=int(os.environ.get("ANSWER_TEXT_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


# --- the scripted upstream, and the client's reading ------------------------------------------------


def plain(choice: Json, api: str = "chat") -> Behaviour:
    """Answer with one choice as given (a chat.completion or a text_completion)."""

    async def behaviour(request: web.Request, body: Json) -> web.StreamResponse:
        kind = "chat.completion" if api == "chat" else "text_completion"
        answer = {"id": "x", "object": kind, "created": 1, "model": body["model"], "choices": [choice]}
        return web.json_response(answer, dumps=lambda o: orjson.dumps(o).decode())

    return behaviour


def sse(choices: list[Json], api: str = "chat") -> Behaviour:
    """Stream one chunk per choice object given (each `{"index": 0, ...}`), then [DONE]."""

    async def behaviour(request: web.Request, body: Json) -> web.StreamResponse:
        kind = "chat.completion.chunk" if api == "chat" else "text_completion"
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for choice in choices:
            event = {"id": "x", "object": kind, "created": 1, "model": body["model"], "choices": [choice]}
            await response.write(b"data: " + orjson.dumps(event) + b"\n\n")
        await response.write(b"data: [DONE]\n\n")
        return response

    return behaviour


def deltas(*parts: Json, finish: str = "stop", **last: Any) -> list[Json]:
    """Chunks' choices: a role delta, each of `parts` as a delta, then the finish (with `last`)."""
    return [
        {"index": 0, "delta": {"role": "assistant"}, "finish_reason": None},
        *({"index": 0, "delta": part, "finish_reason": None} for part in parts),
        {"index": 0, "delta": {}, "finish_reason": finish, **last},
    ]


def accumulate(into: Any, delta: Any) -> Any:
    """Join a delta as the SDKs do: strings appended, objects merged, list entries by `index`."""
    if isinstance(into, str) and isinstance(delta, str):
        return into + delta
    if isinstance(into, dict) and isinstance(delta, dict):
        for key, value in delta.items():
            into[key] = value if into.get(key) is None or key in ("index", "type") else accumulate(into[key], value)
        return into
    if isinstance(into, list) and isinstance(delta, list):
        for entry in delta:
            at = entry.get("index") if isinstance(entry, dict) else None
            same = [e for e in into if isinstance(e, dict) and at is not None and e.get("index") == at]
            if same:
                accumulate(same[0], entry)
            else:
                into.append(entry)
        return into
    return delta


async def ask(http: ClientSession, gateway: TestServer, path: str = "/v1/chat/completions", **fields: Any) -> Any:
    """What the client got: (status, the choice as an SDK assembles it, the raw body, the body or chunks)."""
    body = {"model": "fake", **fields}
    if path.endswith("chat/completions"):
        body.setdefault("messages", [{"role": "user", "content": "hi"}])
    else:
        body.setdefault("prompt", "hi")
    async with http.post(gateway.make_url(path), json=body) as response:
        raw = await response.read()
    if not fields.get("stream"):
        answer = orjson.loads(raw)
        return response.status, (answer.get("choices") or [None])[0], raw, answer
    events = [orjson.loads(line[6:]) for line in raw.split(b"\n") if line.startswith(b"data: {")]
    choice: Json = {}
    for event in events:
        for part in event.get("choices") or []:
            accumulate(choice, part)
    return response.status, choice, raw, events


def client_reads(value: Any) -> str:
    """Every text of `value` as a client reads it: strings, and what a string that is JSON spells."""
    out: list[str] = []

    def walk(item: Any) -> None:
        if isinstance(item, str):
            out.append(item)
            with contextlib.suppress(ValueError):
                walk(json.loads(item))
        elif isinstance(item, dict):
            for key, inner in item.items():
                out.append(str(key))
                walk(inner)
        elif isinstance(item, list):
            for inner in item:
                walk(inner)

    walk(value)
    return "\n".join(out)


def never_received(raw: bytes, choice: Any) -> None:
    assert CANARY.encode() not in raw
    assert ESCAPED.encode() not in raw
    assert CANARY not in client_reads(choice), choice


async def guarded(make_gateway: GatewayFactory, upstream: FakeUpstream, *checks: Json) -> TestServer:
    fake = deployment("fake", upstream.base_url, retries=0, policies=["guarded"])
    return await make_gateway({"deployments": [fake], "policies": {"guarded": {"output": list(checks)}}})


@pytest.fixture
async def denying(make_gateway: GatewayFactory, upstream: FakeUpstream) -> TestServer:
    return await guarded(make_gateway, upstream, DENY)


def call(arguments: str, name: str = "lookup") -> Json:
    return {"id": "call_1", "type": "function", "function": {"name": name, "arguments": arguments}}


# --- each text of a chat answer, plain ---------------------------------------------------------------

MESSAGES: dict[str, Json] = {
    "refusal": {"content": None, "refusal": SAY},
    "reasoning_content": {"content": "Fine.", "reasoning_content": SAY},
    "reasoning": {"content": "Fine.", "reasoning": SAY},
    "function_call": {"content": None, "function_call": {"name": "lookup", "arguments": json.dumps({"q": SAY})}},
    "escaped_arguments": {"content": None, "tool_calls": [call('{"q": "' + ESCAPED + '"}')]},
    "function_call_escaped": {"content": None, "function_call": {"name": "f", "arguments": '{"q":"' + ESCAPED + '"}'}},
    "after_a_json_newline": {"content": None, "tool_calls": [call(json.dumps({"q": "line\n" + CANARY}))]},
    "tool_name": {"content": None, "tool_calls": [call("{}", name=CANARY)]},
    "audio_transcript": {"content": None, "audio": {"id": "a", "data": "AAAA", "transcript": SAY}},
    "unknown_field": {"content": "Fine.", "thoughts": SAY},
    "unknown_nested": {"content": "Fine.", "provider_fields": {"notes": [{"text": SAY}]}},
}


@pytest.mark.parametrize("where", sorted(MESSAGES))
async def test_a_deny_withholds_a_plain_choice_whatever_text_carries_the_canary(
    denying: TestServer, upstream: FakeUpstream, http: ClientSession, where: str
) -> None:
    message = {"role": "assistant", **MESSAGES[where]}
    upstream.script(plain({"index": 0, "message": message, "logprobs": None, "finish_reason": "stop"}))
    status, choice, raw, answer = await ask(http, denying)

    assert status == 200
    never_received(raw, choice)
    assert choice["finish_reason"] == "content_filter"
    assert choice["message"] == {"role": "assistant", "content": None, "refusal": None}
    assert {"check": "pii", "verdict": "deny", "index": 0}.items() <= answer["guardrail_results"][0].items()


async def test_a_choice_level_field_is_read_and_a_withheld_choice_keeps_nothing_unknown(
    denying: TestServer, upstream: FakeUpstream, http: ClientSession
) -> None:
    upstream.script(
        plain({"index": 0, "message": {"role": "assistant", "content": "Fine."}, "finish_reason": "stop", "why": SAY})
    )
    _, choice, raw, _ = await ask(http, denying)

    never_received(raw, choice)
    assert set(choice) == {"index", "message", "logprobs", "finish_reason"}


async def test_only_the_denied_choice_is_withheld(
    denying: TestServer, upstream: FakeUpstream, http: ClientSession
) -> None:
    async def two(request: web.Request, body: Json) -> web.StreamResponse:
        choices = [
            {"index": 0, "message": {"role": "assistant", "content": "Fine."}, "finish_reason": "stop"},
            {"index": 1, "message": {"role": "assistant", "content": "x", "reasoning_content": SAY}},
        ]
        return web.json_response({"id": "x", "object": "chat.completion", "created": 1, "choices": choices})

    upstream.script(two)
    _, _, raw, answer = await ask(http, denying, n=2)

    assert CANARY.encode() not in raw
    assert answer["choices"][0]["message"]["content"] == "Fine."
    assert answer["choices"][1]["finish_reason"] == "content_filter"
    # one verdict per check and choice, however many texts a choice has
    assert [(r["index"], r["verdict"]) for r in answer["guardrail_results"]] == [(0, "pass"), (1, "deny")]


# --- streamed: each text, held back across chunk borders ---------------------------------------------

STREAMS: dict[str, list[Json]] = {
    "content": deltas({"content": "the number is 536-2"}, {"content": "2-8479 ok"}),
    "refusal": deltas({"refusal": "the number is 536"}, {"refusal": "-22-84"}, {"refusal": "79 ok"}),
    "reasoning_content": deltas({"reasoning_content": "the number is 53"}, {"reasoning_content": "6-22-8479 ok"}),
    "reasoning": deltas({"reasoning": "the number is 536-22-"}, {"reasoning": "8479"}, {"content": "Fine."}),
    "tool_call_arguments": deltas(
        {"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": ""}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '{"q": "' + ESCAPED[:9]}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": ESCAPED[9:40]}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": ESCAPED[40:] + '"}'}}]},
        finish="tool_calls",
    ),
    "after_a_json_newline": deltas(
        {"function_call": {"name": "f", "arguments": '{"q": "line\\'}},
        {"function_call": {"arguments": 'n536-22-8479"}'}},
        finish="function_call",
    ),
    "function_call": deltas(
        {"function_call": {"name": "f", "arguments": '{"q": "the number is 536-22'}},
        {"function_call": {"arguments": '-8479"}'}},
        finish="function_call",
    ),
    "tool_name": deltas({"tool_calls": [{"index": 0, "id": "c", "type": "function", "function": {"name": CANARY}}]}),
    "unknown_delta_field": deltas({"thinking": "the number is 536-22"}, {"thinking": "-8479 ok"}, {"content": "x"}),
    "unknown_nested": deltas({"extra": {"notes": "the number is 536-22"}}, {"extra": {"notes": "-8479"}}),
    "unknown_list": deltas({"citations": ["see", f"the number is {CANARY}"]}),
    "choice_level": [
        {"index": 0, "delta": {"role": "assistant", "content": "Fine."}, "finish_reason": None, "why": "536-22-84"},
        {"index": 0, "delta": {}, "finish_reason": "stop", "why": "79 ok"},
    ],
}


@pytest.mark.parametrize("where", sorted(STREAMS))
async def test_a_deny_cuts_a_stream_whatever_text_carries_the_canary_across_chunks(
    denying: TestServer, upstream: FakeUpstream, http: ClientSession, where: str
) -> None:
    upstream.script(sse(STREAMS[where]))
    status, choice, raw, events = await ask(http, denying, stream=True)

    assert status == 200
    never_received(raw, choice)
    assert choice["finish_reason"] == "content_filter"
    reasons = [c["finish_reason"] for e in events for c in e.get("choices", []) if c.get("finish_reason")]
    assert reasons == ["content_filter"]
    assert events[-1]["guardrail_results"][0]["verdict"] == "deny"


async def test_a_stream_is_released_as_it_flows_when_nothing_is_denied(
    denying: TestServer, upstream: FakeUpstream, http: ClientSession
) -> None:
    """Held back is only what a match could still grow into: texts, names and ids arrive intact."""
    name: Json = {"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "lookup"}}]}
    parts: list[Json] = [
        {"reasoning_content": "Thinking about "},
        {"reasoning_content": "it."},
        {"refusal": "No, sorry."},
        name,
    ]
    upstream.script(sse(deltas(*parts, {"tool_calls": [{"index": 0, "function": {"arguments": '{"a": 1}'}}]})))
    _, choice, _, events = await ask(http, denying, stream=True)

    assert choice["delta"]["reasoning_content"] == "Thinking about it."
    assert choice["delta"]["refusal"] == "No, sorry."
    assert choice["delta"]["tool_calls"] == [
        {"index": 0, "id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": '{"a": 1}'}}
    ]
    first_call = next(c for e in events for c in e["choices"] if "tool_calls" in c["delta"])
    assert first_call["delta"]["tool_calls"][0]["function"]["name"] == "lookup"  # a name is never held
    assert choice["finish_reason"] == "stop"


# --- redaction keeps arguments JSON ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "placeholder", "expected"),
    [
        ('{"q": "' + ESCAPED + '", "n": 1}', "[SSN]", {"q": "[SSN]", "n": 1}),  # the SSN spelled in escapes
        ('{"ssn": 536228479, "n": 1}', "[SSN]", {"ssn": "[SSN]", "n": 1}),  # a bare number, said to be an SSN
        (  # a placeholder JSON must escape, among escapes that stay
            '{"q": "say \\"hi\\" to 536-22-8479\\n", "keep": "\\u00e9\\ud83d\\ude00\\u0022"}',
            '<"\\SSN">',
            {"q": 'say "hi" to <"\\SSN">\n', "keep": '\u00e9\U0001f600"'},
        ),
    ],
)
async def test_redacted_arguments_stay_json_plain_and_streamed(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    http: ClientSession,
    arguments: str,
    placeholder: str,
    expected: Json,
) -> None:
    gateway = await guarded(make_gateway, upstream, {**REDACT, "placeholder": placeholder})
    message = {"role": "assistant", "content": None, "tool_calls": [call(arguments)]}
    upstream.script(plain({"index": 0, "message": message, "finish_reason": "tool_calls"}))
    _, choice, raw, _ = await ask(http, gateway)
    pieces = [arguments[i : i + 3] for i in range(0, len(arguments), 3)]  # escapes split everywhere
    opening = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": ""}}
    streamed = [{"tool_calls": [{"index": 0, "function": {"arguments": piece}}]} for piece in pieces]
    upstream.script(sse(deltas({"tool_calls": [opening]}, *streamed, finish="tool_calls")))
    _, streamed_choice, streamed_raw, _ = await ask(http, gateway, stream=True)

    for got, body in ((choice["message"], raw), (streamed_choice["delta"], streamed_raw)):
        never_received(body, got)
        assert json.loads(got["tool_calls"][0]["function"]["arguments"]) == expected


async def test_unchanged_arguments_are_relayed_as_sent(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession
) -> None:
    gateway = await guarded(make_gateway, upstream, REDACT)
    arguments = '{"city":  "Par\\u00eds"}'
    upstream.script(
        plain({"index": 0, "message": {"role": "assistant", "content": None, "tool_calls": [call(arguments)]}})
    )
    _, choice, _, _ = await ask(http, gateway)

    assert choice["message"]["tool_calls"][0]["function"]["arguments"] == arguments


async def test_a_redaction_drops_what_spells_the_old_text(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession
) -> None:
    """Token ids (vLLM's `token_ids`) and logprobs would spell the text the redaction removed."""
    gateway = await guarded(make_gateway, upstream, REDACT)
    logprobs = {"content": [{"token": CANARY, "logprob": 0.0, "bytes": None, "top_logprobs": []}]}
    message = {"role": "assistant", "content": SAY}
    upstream.script(
        plain({"index": 0, "message": message, "logprobs": logprobs, "token_ids": [1, 2], "stop_reason": None})
    )
    _, choice, raw, _ = await ask(http, gateway)

    never_received(raw, choice)
    assert choice["message"]["content"] == "the number is [SSN] ok"
    assert choice["logprobs"] is None
    assert "token_ids" not in choice


# --- completions -------------------------------------------------------------------------------------


async def test_completions_read_every_string_of_a_choice_plain_and_streamed(
    denying: TestServer, upstream: FakeUpstream, http: ClientSession
) -> None:
    upstream.script(plain({"index": 0, "text": "Fine.", "finish_reason": "stop", "note": SAY}, api="completions"))
    _, choice, raw, _ = await ask(http, denying, "/v1/completions")
    never_received(raw, choice)
    assert choice["finish_reason"] == "content_filter"
    assert set(choice) == {"index", "text", "logprobs", "finish_reason"}

    chunks = [
        {"index": 0, "text": "Fine.", "finish_reason": None, "note": "the number is 536-2"},
        {"index": 0, "text": "", "finish_reason": "stop", "note": "2-8479"},
    ]
    upstream.script(sse(chunks, api="completions"))
    _, choice, raw, _ = await ask(http, denying, "/v1/completions", stream=True)
    never_received(raw, choice)
    assert choice["finish_reason"] == "content_filter"


# --- the property: whatever field carries the canary, the client never receives it ---------------------

names = st.from_regex(r"[a-z][a-z_]{0,11}", fullmatch=True).filter(
    lambda n: n not in ("role", "index", "type", "id", "finish_reason", "logprobs", "delta", "message")
)
FILLER = st.sampled_from(["", "Sure. ", "Let me think. ", "Here:\n", "ok "])


@st.composite
def carriers(draw: st.DrawFn) -> tuple[str, Any]:
    """(where, the value that carries the canary there): known texts and unknown fields at any depth."""
    text = draw(FILLER) + " " + CANARY + " " + draw(FILLER)
    spelled = draw(st.sampled_from(["", "\\n", "\\t", "x\\r\\n"])) + draw(st.sampled_from([CANARY, ESCAPED]))
    key = draw(names)
    return draw(
        st.sampled_from(
            [
                ("content", text),
                ("refusal", text),
                ("reasoning_content", text),
                ("reasoning", text),
                ("tool_calls", '{"q": "' + spelled + '"}'),
                ("function_call", '{"q": "' + spelled + '"}'),
                ("tool_name", CANARY),
                ("message:" + key, text),
                ("message:" + key + ":nested", {key: {"deep": text}}),
                ("message:" + key + ":list", ["x", text]),
                ("choice:" + key, text),
            ]
        )
    )


def place(where: str, value: Any) -> tuple[Json, Json]:
    """(message or delta fields, choice fields) carrying `value` at `where`."""
    if where in ("content", "refusal", "reasoning_content", "reasoning"):
        return {where: value}, {}
    if where == "tool_calls":
        return {"tool_calls": [call(value)]}, {}
    if where == "function_call":
        return {"function_call": {"name": "f", "arguments": value}}, {}
    if where == "tool_name":
        return {"tool_calls": [call("{}", name=value)]}, {}
    scope, key, *_ = where.split(":")
    return ({key: value}, {}) if scope == "message" else ({}, {key: value})


def split(value: Any, cuts: list[int]) -> list[Any]:
    """A streamed text in pieces (a string at the cuts; other values whole)."""
    if not isinstance(value, str):
        return [value]
    points = sorted({0, len(value), *(c % (len(value) + 1) for c in cuts)})
    return [value[a:b] for a, b in itertools.pairwise(points)]


def streamed(where: str, value: Any, cuts: list[int]) -> list[Json]:
    pieces = split(value, cuts) if where not in ("tool_name",) and not where.endswith(":list") else [value]
    chunks: list[Json] = [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]
    for piece in pieces:
        fields, on_choice = place(where, piece)
        if "tool_calls" in fields:
            entry = fields["tool_calls"][0]
            fields = {"tool_calls": [{**entry, "index": 0}]}
            if len(chunks) > 1 and where == "tool_calls":
                fields = {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}
        if "function_call" in fields and len(chunks) > 1:
            fields = {"function_call": {"arguments": piece}}
        chunks.append({"index": 0, "delta": fields, "finish_reason": None, **on_choice})
    chunks.append({"index": 0, "delta": {}, "finish_reason": "stop"})
    return chunks


@FUZZ
@given(carrier=carriers(), stream=st.booleans(), cuts=st.lists(st.integers(0, 200), max_size=4))
async def test_the_client_never_receives_the_canary_from_any_field(
    denying: TestServer,
    upstream: FakeUpstream,
    http: ClientSession,
    carrier: tuple[str, Any],
    stream: bool,
    cuts: list[int],
) -> None:
    where, value = carrier
    if stream:
        upstream.script(sse(streamed(where, value, cuts)))
    else:
        fields, on_choice = place(where, value)
        message = {"role": "assistant", "content": None, **fields}
        upstream.script(plain({"index": 0, "message": message, "finish_reason": "stop", **on_choice}))
    status, choice, raw, _ = await ask(http, denying, stream=stream)

    assert status == 200
    never_received(raw, choice)
    assert choice["finish_reason"] == "content_filter"
