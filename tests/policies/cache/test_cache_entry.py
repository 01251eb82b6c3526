"""Stored entries: what goes in comes out byte for byte; anything damaged is recognised."""

from __future__ import annotations

import orjson
import pytest

from policies.cache import CacheEntry, CorruptEntry, decode_entry, encode_entry, make_entry
from policies.cache.entry import ENTRY_FORMAT_VERSION
from tests.support.cache_samples import completion, raw


def test_round_trip_keeps_the_body_bytes_and_times() -> None:
    body = (  # formatted the way an upstream might: the cache must not re-serialise it
        b'{"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "m",\n'
        b' "choices": [{"text": "hi", "index": 0, "logprobs": null, "finish_reason": "stop"}]}'
    )
    entry = make_entry(body, now=1000.0, ttl_s=60)
    decoded = decode_entry(encode_entry(entry))
    assert decoded == entry
    assert decoded.body == body  # relayed exactly as the upstream formatted it
    assert (decoded.created_at, decoded.expires_at) == (1000.0, 1060.0)
    assert decoded.response()["choices"][0]["text"] == "hi"


def test_age_and_expiry() -> None:
    entry = make_entry(raw(completion()), now=100.0, ttl_s=10)
    assert entry.age_s(107.5) == 7.5
    assert entry.age_s(90.0) == 0.0  # a clock behind the writer's never gives a negative Age
    assert not entry.expired(109.9)
    assert entry.expired(110.0)


def test_every_truncation_of_a_blob_is_corrupt() -> None:
    blob = encode_entry(make_entry(raw(completion("a b")), now=1.0, ttl_s=5))
    for end in range(len(blob)):
        with pytest.raises(CorruptEntry):
            decode_entry(blob[:end])


@pytest.mark.parametrize(
    "blob",
    [
        b"",
        b"garbage",
        b"\x00\xff\xfe\n\x00",
        b'{"v": 1, "created_at": 1, "expires_at": 2}\n{"error": {"message": "boom"}}',
        b'{"v": 1, "created_at": "x", "expires_at": 2}\n' + raw(completion()),
        b'{"v": 1, "created_at": 1}\n' + raw(completion()),
        b'["v", 1]\n' + raw(completion()),
        b'{"created_at": 1, "expires_at": 2}\n' + raw(completion()),
        orjson.dumps({"v": ENTRY_FORMAT_VERSION + 1, "created_at": 1, "expires_at": 2}) + b"\n" + raw(completion()),
        b'{"v": 1, "created_at": 1, "expires_at": 2}\n' + raw(completion(finish_reason=None)),
        b'{"v": 1, "created_at": 1, "expires_at": 2}\n' + raw({**completion(), "choices": []}),
    ],
)
def test_foreign_old_or_incomplete_blobs_are_corrupt(blob: bytes) -> None:
    with pytest.raises(CorruptEntry):
        decode_entry(blob)


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        raw({"error": {"message": "rate limited"}}),
        raw(completion(finish_reason=None)),
        raw({"type": "message", "content": None}),  # a native (Messages) answer without its content
        raw({"type": "message_events", "events": []}),  # a native stream without its events
        raw({"type": "message_events", "events": [{"type": "message_start"}]}),  # events kept as strings
    ],
)
def test_only_complete_completions_become_entries(body: bytes) -> None:
    with pytest.raises(CorruptEntry):
        make_entry(body, now=0.0, ttl_s=1)


def test_native_answers_round_trip_as_they_came() -> None:
    message = b'{"type": "message", "id": "msg_1", "content": [{"type": "text", "text": "hi"}], "x": null}'
    events = raw({"type": "message_events", "events": ['{"type": "message_start"}', '{"type":"message_stop"}']})
    for body in (message, events):
        decoded = decode_entry(encode_entry(make_entry(body, now=1.0, ttl_s=5)))
        assert decoded.body == body


def test_size_counts_the_body() -> None:
    small = make_entry(raw(completion("x")), now=0.0, ttl_s=1)
    large = make_entry(raw(completion("x" * 5000)), now=0.0, ttl_s=1)
    assert large.nbytes - small.nbytes == 4999
    assert isinstance(small, CacheEntry)


def test_an_entry_from_a_stream_without_usage_says_so_and_keeps_saying_so_in_redis() -> None:
    no_usage = make_entry(raw(completion(usage=False)), now=1.0, ttl_s=60, usage_requested=False)
    had_usage_anyway = make_entry(raw(completion()), now=1.0, ttl_s=60, usage_requested=False)
    plain_without_usage = make_entry(raw(completion(usage=False)), now=1.0, ttl_s=60)

    assert no_usage.without_usage
    assert decode_entry(encode_entry(no_usage)) == no_usage
    assert not had_usage_anyway.without_usage  # the upstream sent usage unasked: nothing is missing
    assert not plain_without_usage.without_usage  # a plain answer is what a plain call returns
    assert decode_entry(encode_entry(plain_without_usage)) == plain_without_usage
