"""JSON texts (tool-call arguments) under the output guards: read as the value a parser reads (an SSN
spelled in `\\u` escapes is an SSN), however the stream splits them, and redacted so that they stay
the same JSON but for the placeholders (property-based)."""

from __future__ import annotations

import itertools
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from policies.guardrails import RequestFacts
from policies.guardrails.json_text import JsonRedactor, Unescaper, unescape
from tests.support.guardrail_helpers import output_guard

SSN = "536-22-8479"
REDACT = {"check": "pii", "entities": ["ssn"], "action": "redact"}
DENY = {"check": "pii", "entities": ["ssn"], "action": "deny"}

plain_text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | plain_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(plain_text, inner, max_size=3),
    max_leaves=8,
)


def with_canary(value: Any, text: str) -> dict[str, Any]:
    return {"before": value, "q": f"{text}\nmy SSN is {SSN}, {text}", "after": value}


def pieces(text: str, cuts: list[int]) -> list[str]:
    points = sorted({0, len(text), *(c % (len(text) + 1) for c in cuts)})
    return [text[a:b] for a, b in itertools.pairwise(points)]


@settings(max_examples=300, deadline=None)
@given(value=values, ascii_only=st.booleans(), cuts=st.lists(st.integers(0, 400), max_size=8))
def test_unescaping_keeps_the_value_however_the_text_is_split(value: Any, ascii_only: bool, cuts: list[int]) -> None:
    raw = json.dumps(value, ensure_ascii=ascii_only)
    whole = unescape(raw)
    unescaper = Unescaper()
    joined = "".join(unescaper.feed(piece) for piece in pieces(raw, cuts)) + unescaper.feed("", final=True)

    assert joined == whole
    assert whole == json.dumps(value, ensure_ascii=False)  # escapes only where JSON needs them


def test_an_ssn_spelled_in_escapes_is_read_as_one() -> None:
    raw = json.dumps({"q": SSN}).replace("5", "\\u0035").replace("-", "\\u002d")
    assert unescape(raw) == '{"q": "536-22-8479"}'
    assert unescape('"\\\\u0036"') == '"\\\\u0036"'  # an escaped backslash, then the letters u0036


@settings(max_examples=200, deadline=None)
@given(value=values, text=plain_text, ascii_only=st.booleans(), cuts=st.lists(st.integers(0, 400), max_size=8))
async def test_streamed_arguments_are_redacted_into_the_same_json(
    value: Any, text: str, ascii_only: bool, cuts: list[int]
) -> None:
    document = with_canary(value, text)
    raw = json.dumps(document, ensure_ascii=ascii_only)
    expected = json.loads(raw)
    guard = output_guard(REDACT).stream(RequestFacts())
    released = [guard.feed(0, piece, "json") for piece in pieces(raw, cuts)]
    end = await guard.finish(0)
    sent = "".join(step.text for step in released) + end.text

    assert end.finish_reason is None
    assert not any(step.finish_reason for step in released)
    got = json.loads(sent)
    assert SSN not in json.dumps(got, ensure_ascii=False)
    assert got["before"] == expected["before"] or SSN in json.dumps(expected["before"])
    assert "[SSN]" in got["q"]


@settings(max_examples=200, deadline=None)
@given(value=values, text=plain_text, ascii_only=st.booleans())
async def test_plain_arguments_are_redacted_into_the_same_json(value: Any, text: str, ascii_only: bool) -> None:
    raw = json.dumps(with_canary(value, text), ensure_ascii=ascii_only)
    outcome = await output_guard(REDACT).check([raw], RequestFacts(), ["json"])

    got = json.loads(outcome.choices[0].text)
    assert SSN not in json.dumps(got, ensure_ascii=False)
    assert got["after"] == json.loads(raw)["after"] or SSN in json.dumps(value)


async def test_a_deny_reads_the_unescaped_arguments_streamed() -> None:
    raw = json.dumps({"q": SSN}).replace("-", "\\u002d").replace("8", "\\u0038")
    guard = output_guard(DENY).stream(RequestFacts())
    steps = [guard.feed(0, piece, "json") for piece in pieces(raw, [9, 14, 15, 20])]
    steps.append(await guard.finish(0))

    assert "content_filter" in [step.finish_reason for step in steps]
    assert "536" not in "".join(step.text for step in steps)


def test_a_match_across_the_structure_is_not_redacted_as_json() -> None:
    """A placeholder over a string's quotes would break the JSON: the caller withholds instead."""
    text = '{"a": "536-22", "b": "8479"}'
    assert JsonRedactor().redact(text, [(11, 23, "[X]")], final=True) is None
    assert JsonRedactor().redact(text, [(7, 13, "[X]")], final=True) == '{"a": "[X]", "b": "8479"}'


async def test_a_redaction_json_cannot_hold_withholds_the_arguments() -> None:
    words = {"check": "words", "words": ['a", "b'], "action": "redact"}
    outcome = await output_guard(words).check(['{"x": "a", "b": 1}'], RequestFacts(), ["json"])
    assert outcome.choices[0].denied is not None
    assert "JSON" in (outcome.choices[0].denied.reason or "")


@settings(max_examples=300, deadline=None)
@given(
    value=values,
    ascii_only=st.booleans(),
    cuts=st.lists(st.integers(0, 400), max_size=6),
    marks=st.lists(st.tuples(st.integers(0, 400), st.integers(1, 12)), max_size=4),
    placeholder=st.sampled_from(["[X]", '<"\\X">', "\n", ""]),
)
def test_any_redaction_leaves_json_json_or_is_refused(
    value: Any, ascii_only: bool, cuts: list[int], marks: list[tuple[int, int]], placeholder: str
) -> None:
    """Wherever the matches fall (in strings, over numbers, across quotes and the structure) and
    however the text is released, what comes out is JSON, or the redaction is refused."""
    raw = unescape(json.dumps(value, ensure_ascii=ascii_only))
    redactor = JsonRedactor()
    out: list[str] = []
    segments = pieces(raw, cuts)
    for number, segment in enumerate(segments):
        spans: list[tuple[int, int, str]] = []
        for start, length in sorted(marks):
            start %= len(segment) + 1
            end = min(start + length, len(segment))
            if start < end and (not spans or start >= spans[-1][1]):
                spans.append((start, end, placeholder))
        redacted = redactor.redact(segment, spans, final=number == len(segments) - 1)
        if redacted is None:
            return
        out.append(redacted)
    json.loads("".join(out))
