"""The upstream SSE decoder gives the same events however the network splits the bytes, does work
linear in what it is fed (counted, not timed), and refuses a line or an event over its cap."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from providers.upstream import sse
from providers.upstream.sse import SSEDecoder

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


# --- Linear cost: counted, never timed ------------------------------------------------------------

SLICE = 4096


def searched_bytes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Wrap the decoder's one search for a line end; the list's one item counts the bytes searched."""
    count = [0]
    search = sse.has_line_end

    def counting(data: bytes) -> bool:
        count[0] += len(data)
        return search(data)

    monkeypatch.setattr(sse, "has_line_end", counting)
    return count


@pytest.mark.parametrize("megabytes", [1, 2, 4, 8])
def test_a_long_line_fed_in_small_slices_costs_work_linear_in_its_size(
    monkeypatch: pytest.MonkeyPatch, megabytes: int
) -> None:
    """The old decoder re-joined and re-searched its whole buffer for every slice (a 40 MB line
    took a minute of CPU): the work per byte must not grow with the line."""
    searched = searched_bytes(monkeypatch)
    payload = b"x" * (megabytes * 1024 * 1024)
    stream = b"data: " + payload + b"\n\ndata: [DONE]\n\n"
    decoder = SSEDecoder(max_event_bytes=16 * 1024 * 1024)
    events: list[bytes] = []

    for start in range(0, len(stream), SLICE):
        events += decoder.feed(stream[start : start + SLICE])

    assert events == [payload]
    assert decoder.done
    assert searched[0] <= len(stream)  # each byte searched for a line end at most once
    assert decoder.work <= 10 * len(stream)  # searched, appended, copied out, split, cut: a constant each


def test_many_multi_line_events_with_cr_line_ends_cost_linear_work(monkeypatch: pytest.MonkeyPatch) -> None:
    searched = searched_bytes(monkeypatch)
    event = b"event: x\r\ndata: " + b"y" * 300 + b"\rdata: " + b"z" * 300 + b"\r\n: comment\r\n\r\n"
    stream = event * 20_000 + b"data: [DONE]\r\n\r\n"  # ~13 MB
    decoder = SSEDecoder()
    count = 0

    for start in range(0, len(stream), 1000):  # slices that cut lines and CRLFs anywhere
        count += len(decoder.feed(stream[start : start + 1000]))

    assert count == 20_000
    assert decoder.done
    assert searched[0] <= len(stream)
    assert decoder.work <= 12 * len(stream)


# --- Bounds ----------------------------------------------------------------------------------------

CAP = 64 * 1024


def feed_until_refused(decoder: SSEDecoder, stream: bytes, slice_size: int = 1000) -> int:
    """Feed `stream` in slices until the decoder refuses it; the bytes fed by then."""
    fed = [0]

    def feed_all() -> None:
        for start in range(0, len(stream), slice_size):
            fed[0] += slice_size
            decoder.feed(stream[start : start + slice_size])

    with pytest.raises(sse.EventTooLarge) as refused:
        feed_all()
    assert refused.value.limit == CAP
    assert str(CAP) in str(refused.value)
    return fed[0]


def test_a_line_longer_than_the_cap_is_refused_as_soon_as_it_passes_it() -> None:
    stream = b"data: " + b"x" * (10 * CAP)  # never ends

    fed = feed_until_refused(SSEDecoder(CAP), stream)

    assert fed <= CAP + 1000  # refused on the slice that passed the cap: nothing more was held


@pytest.mark.parametrize(
    "line",
    [b"data: " + b"x" * CAP + b"\n", b": " + b"c" * CAP + b"\n", b"event: " + b"e" * CAP + b"\r\n"],
    ids=["data", "comment", "other-field"],
)
def test_a_whole_line_over_the_cap_in_one_read_is_refused(line: bytes) -> None:
    with pytest.raises(sse.EventTooLarge):
        SSEDecoder(CAP).feed(line + b"\n")


def test_data_lines_without_a_blank_line_are_refused_past_the_cap() -> None:
    line = b"data: " + b"x" * 1000 + b"\n"
    stream = line * (10 * CAP // len(line))  # lines each far below the cap, one event never ending

    fed = feed_until_refused(SSEDecoder(CAP), stream)

    assert fed <= CAP + 2000


def test_a_line_and_an_event_of_exactly_the_cap_pass() -> None:
    half = CAP // 2
    lines = b"data: " + b"a" * half + b"\ndata: " + b"b" * (CAP - half - 1) + b"\n\n"  # joined: exactly CAP
    one_line = b"data: " + b"c" * (CAP - 6) + b"\n\n"  # the line, `data: ` included, is CAP bytes

    decoder = SSEDecoder(CAP)

    assert decoder.feed(lines) == [b"a" * half + b"\n" + b"b" * (CAP - half - 1)]
    assert decoder.feed(one_line) == [b"c" * (CAP - 6)]
    with pytest.raises(sse.EventTooLarge):
        SSEDecoder(CAP).feed(lines.replace(b"a\n", b"aa\n"))  # one byte more
    with pytest.raises(sse.EventTooLarge):
        SSEDecoder(CAP).feed(one_line.replace(b"c\n", b"cc\n"))


def test_many_small_events_in_one_read_are_not_an_event_too_large() -> None:
    stream = b"".join(b"data: %d\n\n" % index for index in range(50_000))  # ~500 KB: many times the cap

    events = SSEDecoder(CAP).feed(stream)

    assert len(events) == 50_000


NAMED = (  # Anthropic's way: an event line before each data line
    b'event: message_start\ndata: {"type":"message_start"}\n\n'
    b"event: ping\ndata: \n\n"
    b'event: content_block_delta\ndata: {"type": "content_block_delta"}\n\n'
)


@given(st.lists(st.integers(min_value=0), max_size=10))
def test_named_events_split_anywhere(cuts: list[int]) -> None:
    events = [b'{"type":"message_start"}', b'{"type": "content_block_delta"}']
    assert decode(split(NAMED, cuts)) == (events, False)
    assert decode(split(NAMED + b"event: end\ndata: [DONE]\n\n" + NAMED, cuts)) == (events, True)


# --- Same events as a plain reference decoder, on any stream and any split --------------------------


def reference(stream: bytes) -> tuple[list[bytes], bool]:
    """The grammar, applied to the whole stream at once (no incremental state)."""
    events: list[bytes] = []
    data: list[bytes] = []
    for line in stream.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")[:-1]:
        if line.startswith(b"data:"):
            value = line[5:]
            data.append(value[1:] if value.startswith(b" ") else value)
        elif not line and data:
            payload = b"\n".join(data)
            data = []
            if payload == b"[DONE]":
                return events, True
            if payload:
                events.append(payload)
    return events, False


TOKENS = [
    *(b"data:", b"data: ", b"\n", b"\r", b"\r\n", b"\n\n", b":"),
    *(b"event: e", b"event: e\n", b"x", b"yz", b"[DONE]", b" "),
]


@given(st.lists(st.sampled_from(TOKENS), max_size=60), st.lists(st.integers(min_value=0), max_size=20))
def test_any_stream_split_anywhere_gives_the_reference_events(tokens: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(tokens)

    assert decode(split(stream, cuts)) == reference(stream)
