"""Streams and the cache: a completed stream becomes the JSON a plain call returns, and an entry
replays as a stream of the usual shape whose text is exactly the stored text."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from policies.cache import StreamAssembler, replay_chunks
from tests.support.cache_samples import completion, openai_stream, token_logprobs, usage_event

texts = st.text(st.characters(codec="utf-8"), max_size=40)


def payloads(events: list[dict[str, Any]]) -> list[bytes]:
    return [orjson.dumps(event) for event in events]


@st.composite
def interleavings(draw: st.DrawFn, per_choice: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Any merge of the choices' chunk sequences that keeps each choice's own order."""
    queues = [list(events) for events in per_choice]
    merged: list[dict[str, Any]] = []
    while any(queues):
        queue = draw(st.sampled_from([q for q in queues if q]))
        merged.append(queue.pop(0))
    return merged


def assemble(events: list[dict[str, Any]], batch: int = 3, **options: Any) -> dict[str, Any] | None:
    assembler = StreamAssembler(**options)
    data = payloads(events)
    for start in range(0, len(data), batch):  # fed per upstream read, several payloads at a time
        assembler.feed(data[start : start + batch])
    return assembler.finish()


@given(data=st.data(), choice_texts=st.lists(texts, min_size=1, max_size=4), with_logprobs=st.booleans())
def test_a_completed_stream_assembles_to_the_non_streamed_json(
    data: st.DataObject, choice_texts: list[str], with_logprobs: bool
) -> None:
    # Several choices (n > 1 or several prompts), chunks of different choices interleaved.
    expected = completion(*choice_texts, logprobs=with_logprobs)
    events = [*data.draw(interleavings(openai_stream(expected))), usage_event(expected)]
    assert assemble(events, expected_choices=len(choice_texts)) == expected


def test_logprobs_lists_are_merged_in_order() -> None:
    expected = completion("The quick brown fox", "jumps", logprobs=True)
    per_choice = openai_stream(expected)
    events = [per_choice[1][0], per_choice[0][0], per_choice[0][1], *per_choice[1][1:], *per_choice[0][2:]]
    assembled = assemble([*events, usage_event(expected)])
    assert assembled is not None
    assert assembled["choices"][0]["logprobs"] == token_logprobs("The quick brown fox")
    assert assembled["choices"][0]["logprobs"]["text_offset"] == [0, 3, 6, 9, 12, 15, 18]


def test_without_a_usage_chunk_the_body_has_no_usage() -> None:
    expected = completion("hi there", usage=False)
    assert assemble(openai_stream(expected)[0]) == expected


def test_a_choice_without_finish_reason_is_not_assembled() -> None:
    expected = completion("one", "two")
    first, second = openai_stream(expected)
    assert assemble([*first, *second[:-1]]) is None  # choice 1 never finished


def test_a_missing_choice_is_not_assembled() -> None:
    expected = completion("one", "two")
    assert assemble(openai_stream(expected)[0], expected_choices=2) is None


def test_an_error_event_or_malformed_chunk_is_not_assembled() -> None:
    events = openai_stream(completion("fine"))[0]
    error = {"error": {"message": "upstream overloaded", "type": "server_error"}}
    assert assemble([events[0], error, *events[1:]]) is None
    assembler = StreamAssembler()
    assembler.feed([b"{not json", *payloads(events)])
    assert assembler.finish() is None
    assert assembler.failure == "a chunk is not JSON"


def test_chunks_after_done_spoil_the_stream() -> None:
    events = openai_stream(completion("fine"))[0]
    assembler = StreamAssembler()
    assembler.feed([*payloads(events), b"[DONE]", *payloads(events)])
    assert assembler.finish() is None


def test_a_stream_larger_than_the_entry_bound_is_dropped_early() -> None:
    events = openai_stream(completion("x" * 4000))[0]
    assembler = StreamAssembler(max_bytes=1000)
    assembler.feed(payloads(events))
    assert assembler.finish() is None
    assert assembler.failure == "larger than the entry bound"


def texts_by_index(chunks: list[bytes]) -> dict[int, str]:
    joined: dict[int, str] = {}
    for chunk in chunks:
        for choice in orjson.loads(chunk)["choices"]:
            joined[choice["index"]] = joined.get(choice["index"], "") + choice["text"]
    return joined


@given(choice_texts=st.lists(texts, min_size=1, max_size=4), with_logprobs=st.booleans())
def test_replay_text_is_exactly_the_stored_text_and_round_trips(choice_texts: list[str], with_logprobs: bool) -> None:
    stored = completion(*choice_texts, logprobs=with_logprobs)
    chunks = replay_chunks(stored, include_usage=True)
    assert texts_by_index(chunks) == dict(enumerate(choice_texts))
    assert assemble([orjson.loads(c) for c in chunks]) == stored


def test_replay_looks_like_an_upstream_stream() -> None:
    stored = completion("Hello there, my friend.", "Bye now.")
    chunks = [orjson.loads(c) for c in replay_chunks(stored, include_usage=True)]
    content, usage = chunks[:-1], chunks[-1]
    assert len(content) == 4 + 2  # word-sized pieces, not one chunk per choice
    assert [c["choices"][0]["index"] for c in content[:4]] == [0, 1, 0, 1]  # interleaved like n > 1
    for chunk in content:
        assert chunk.keys() == {"id", "object", "created", "model", "choices", "usage"}
        assert (chunk["object"], chunk["id"], chunk["usage"]) == ("text_completion", "cmpl-1", None)
        assert len(chunk["choices"]) == 1
    finishing = [c["choices"][0] for c in content if c["choices"][0]["finish_reason"] is not None]
    assert [(c["index"], c["finish_reason"]) for c in finishing] == [(1, "stop"), (0, "stop")]
    assert usage["choices"] == []
    assert usage["usage"] == stored["usage"]


def test_without_include_usage_no_usage_chunk_and_no_usage_field() -> None:
    chunks = [orjson.loads(c) for c in replay_chunks(completion("a b c"))]
    assert all(c["choices"] and "usage" not in c for c in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


def test_replay_with_logprobs_sends_one_token_per_chunk_with_its_logprobs() -> None:
    stored = completion("abcdefgh", logprobs=True)
    chunks = [orjson.loads(c)["choices"][0] for c in replay_chunks(stored)]
    assert [c["text"] for c in chunks] == ["abc", "def", "gh"]
    assert [c["logprobs"]["token_logprobs"] for c in chunks] == [[-0.25], [-0.5], [-0.75]]
    assert [c["logprobs"]["text_offset"] for c in chunks] == [[0], [3], [6]]


def test_replay_keeps_logprobs_whole_when_tokens_do_not_spell_the_text() -> None:
    stored = completion("héllo", logprobs=True)
    stored["choices"][0]["logprobs"]["tokens"] = ["h", "bytes:\\xc3\\xa9", "llo"]
    chunks = replay_chunks(stored, include_usage=True)
    assert texts_by_index(chunks) == {0: "héllo"}
    assert assemble([orjson.loads(c) for c in chunks]) == stored


@pytest.mark.parametrize("text", ["", "   ", "\n\nleading newlines", "trailing  \n"])
def test_replay_of_empty_and_whitespace_texts(text: str) -> None:
    chunks = replay_chunks(completion(text))
    assert texts_by_index(chunks) == {0: text}
    assert orjson.loads(chunks[-1])["choices"][0]["finish_reason"] == "stop"
