"""The stream guard on Anthropic's own events (`gateway.pipeline.native.events`), property-tested:
however the upstream cuts its text and thinking into deltas, and however the deltas arrive in
reads, the client gets no piece of a canary, each block's text comes out as the plain check
rewrites the whole text, and the events keep Anthropic's order (each block started, its deltas,
stopped; then message_delta and message_stop)."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.pipeline.guarding import GuardedCall
from gateway.pipeline.native.events import NativeGuardedStream
from policies.guardrails import RequestFacts
from tests.support.guardrail_helpers import output_guard

EMAIL = "jane.doe@example.com"
GUARD = output_guard({"check": "pii", "action": "redact"})
WORDS = st.lists(
    st.sampled_from(["Write ", "to ", EMAIL, " now", ", ", "thanks", ".", " and "]), min_size=1, max_size=8
)


class Events:
    """An upstream's events, in the reads given."""

    def __init__(self, reads: list[list[bytes]]) -> None:
        self.reads = reads

    async def __aiter__(self) -> AsyncIterator[list[bytes]]:
        for read in self.reads:
            yield read

    async def aclose(self) -> None:
        return None


def cut(text: str, points: list[int]) -> list[str]:
    at = sorted({0, len(text), *(point % (len(text) + 1) for point in points)})
    return [text[start:end] for start, end in itertools.pairwise(at) if end > start]


def event(**data: Any) -> bytes:
    return orjson.dumps(data)


def stream(blocks: list[tuple[str, str, list[int]]]) -> list[bytes]:
    out = [event(type="message_start", message={"id": "msg_1", "content": [], "usage": {"input_tokens": 1}})]
    for index, (kind, text, points) in enumerate(blocks):
        field, delta = ("text", "text_delta") if kind == "text" else ("thinking", "thinking_delta")
        out.append(event(type="content_block_start", index=index, content_block={"type": kind, field: ""}))
        out += [
            event(type="content_block_delta", index=index, delta={"type": delta, field: piece})
            for piece in cut(text, points)
        ]
        out.append(event(type="content_block_stop", index=index))
    out.append(event(type="message_delta", delta={"stop_reason": "end_turn"}, usage={"output_tokens": 3}))
    out.append(event(type="message_stop"))
    return out


BLOCKS = st.lists(
    st.tuples(st.sampled_from(["text", "thinking"]), WORDS.map("".join), st.lists(st.integers(0, 200), max_size=6)),
    min_size=1,
    max_size=3,
)


@settings(max_examples=60, deadline=None)
@given(BLOCKS, st.lists(st.integers(0, 40), max_size=5))
async def test_any_cut_of_any_text_comes_out_as_the_plain_check_rewrites_it(
    blocks: list[tuple[str, str, list[int]]], read_cuts: list[int]
) -> None:
    events = stream(blocks)
    bounds = sorted({0, len(events), *(c % (len(events) + 1) for c in read_cuts)})
    reads = [events[a:b] for a, b in itertools.pairwise(bounds) if b > a]
    guarded = GuardedCall(GUARD, RequestFacts(), "redact")
    out = [payload async for read in NativeGuardedStream(Events(reads), guarded) for payload in read]

    assert all(EMAIL.encode() not in payload and b"jane" not in payload for payload in out)
    parsed = [orjson.loads(payload) for payload in out]
    assert [e["type"] for e in parsed[:1] + parsed[-2:]] == ["message_start", "message_delta", "message_stop"]
    texts: dict[int, str] = {}
    order: list[tuple[str, int]] = []
    for item in parsed[1:-2]:
        kind, index = item["type"], item["index"]
        if kind == "content_block_delta":
            assert order[-1] == ("start", index)  # inside its own block
            texts[index] += next(value for name, value in item["delta"].items() if name != "type")
        else:
            order.append(("start" if kind == "content_block_start" else "stop", index))
            texts.setdefault(index, "")
    assert order == [(step, index) for index in range(len(blocks)) for step in ("start", "stop")]
    for index, (kind, text, _) in enumerate(blocks):
        checked = await GUARD.check([text], RequestFacts(), ["answer" if kind == "text" else "text"])
        assert texts[index] == checked.choices[0].text
