"""The upstream SSE decoder gives the same events however the network splits the bytes."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from providers.sse import SSEDecoder

STREAM = (
    b": comment\r\n\r\n"
    b'data: {"a": 1}\r\n\r\n'
    b"event: x\nid: 7\ndata: first line\ndata:second line\n\n"
    b'data: {"b": 2}\r\r'
    b"data: [DONE]\n\n"
    b"data: after done is ignored\n\n"
)
EXPECTED = [b'{"a": 1}', b"first line\nsecond line", b'{"b": 2}']


def decode(pieces: list[bytes]) -> tuple[list[bytes], bool]:
    decoder = SSEDecoder()
    events: list[bytes] = []
    for piece in pieces:
        if decoder.done:
            break
        events += decoder.feed(piece)
    return events, decoder.done


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({0, len(data), *(cut % (len(data) + 1) for cut in cuts)})
    return [data[start:end] for start, end in itertools.pairwise(points)]


def test_whole_stream_in_one_read() -> None:
    assert decode([STREAM]) == (EXPECTED, True)


@given(st.lists(st.integers(min_value=0), max_size=40))
def test_any_split_gives_the_same_events(cuts: list[int]) -> None:
    assert decode(split(STREAM, cuts)) == (EXPECTED, True)


def test_byte_by_byte() -> None:
    assert decode([bytes([b]) for b in STREAM]) == (EXPECTED, True)


PLAIN = b'data: {"a": 1}\n\ndata: {"b": 2}\n\ndata: \n\ndata: [DONE]\n\ndata: {"late": true}\n\n'


@given(st.lists(st.integers(min_value=0), max_size=10))
def test_plain_data_streams_split_anywhere(cuts: list[int]) -> None:
    assert decode(split(PLAIN, cuts)) == ([b'{"a": 1}', b'{"b": 2}'], True)


def test_events_after_done_in_the_same_read_are_dropped() -> None:
    decoder = SSEDecoder()

    assert decoder.feed(PLAIN) == [b'{"a": 1}', b'{"b": 2}']
    assert decoder.done
