"""Incremental Server-Sent Events decoder for upstream completion streams.

Fed raw network reads of any size, it returns the `data` payloads of every event completed so
far. Handles LF, CRLF and CR line endings (even split across reads), multi-line data,
comments and other fields, per the WHATWG event-stream grammar.

Linear in what it is fed, however the reads split a line: the unfinished line waits in one
growing buffer that never holds a line end, so only each new read is searched for one; the line
is copied out of it once, when it ends, and an event's data lines are joined once, when the event
ends.
Bounded: a line, or an event's data, longer than `max_event_bytes` raises `EventTooLarge` as soon
as that many bytes are held, never after buffering more.
"""

from __future__ import annotations

DONE = b"[DONE]"
DEFAULT_MAX_EVENT_BYTES = 4 * 1024 * 1024  # 4 MiB: far above any real completion event


class EventTooLarge(Exception):
    """A line or an event of the stream is larger than the decoder's `max_event_bytes`."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"an SSE line or event is larger than {limit} bytes")
        self.limit = limit


def has_line_end(data: bytes) -> bool:
    """Whether a read holds an LF: the one search of what the decoder is fed (the tests wrap it to
    count the bytes searched)."""
    return b"\n" in data


class SSEDecoder:
    __slots__ = ("_data", "_data_size", "_max", "_pending", "_skip_lf", "done", "work")

    def __init__(self, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self._max = max_event_bytes
        # The unfinished line, which never holds an LF: bytes as a split left it, or a bytearray
        # once reads add to it (appending is then amortized O(1): it grows geometrically).
        self._pending: bytes | bytearray = b""
        self._skip_lf = False  # the last read ended with CR: an LF opening the next one ends no line
        self._data: list[bytes] = []  # the data lines of the event being read
        self._data_size = 0  # their size once joined
        self.done = False  # the `data: [DONE]` sentinel was seen
        self.work = 0  # bytes searched, rewritten or copied so far: a measure of the decoder's cost

    def feed(self, chunk: bytes) -> list[bytes]:
        """Consume one network read; return the payloads of the events it completed."""
        if (
            not self._pending
            and not self._data
            and not self._skip_lf
            and len(chunk) <= self._max  # then no event in it can be too large
            and chunk.endswith(b"\n\n")
        ):
            if chunk.startswith(b"data: "):
                fast = self._single_line_events(chunk)
                if fast is not None:
                    return fast
            elif chunk.startswith(b"event: "):
                fast = self._named_events(chunk)
                if fast is not None:
                    return fast
        if self._skip_lf and chunk:
            self._skip_lf = False
            if chunk[0] == 0x0A:
                chunk = chunk[1:]
        self.work += len(chunk)
        if b"\r" in chunk:
            # Lines end at LF only in the buffer. A CR ending this read is a line end on its own,
            # or the first half of a CRLF whose LF opens the next read: that LF is then skipped.
            self._skip_lf = chunk.endswith(b"\r")
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            self.work += 2 * len(chunk)
        self.work += len(chunk)
        if not has_line_end(chunk):  # nor does the pending line: none ended
            pending = self._pending
            if isinstance(pending, bytes):
                self.work += len(pending)
                pending = self._pending = bytearray(pending)
            pending += chunk
            if len(pending) > self._max:
                raise EventTooLarge(self._max)
            return []
        buffer = chunk
        if self._pending:  # the line it holds ends in this read: copied out once
            pending = self._pending
            if isinstance(pending, bytes):
                buffer = pending + chunk
            else:
                pending += chunk
                buffer = bytes(pending)
            self.work += 2 * len(buffer)
        *lines, self._pending = buffer.split(b"\n")
        tail = self._pending
        self.work += 3 * len(buffer)  # split, then the data lines cut out of their lines
        events: list[bytes] = []
        limit = self._max
        for line in lines:
            if line:
                if len(line) > limit:
                    raise EventTooLarge(limit)
                if line.startswith(b"data:"):
                    value = line[6:] if line.startswith(b"data: ") else line[5:]
                    if self._data:
                        self._data_size += len(value) + 1  # joined with an LF after the previous line
                        if self._data_size > limit:
                            raise EventTooLarge(limit)
                        self._data.append(value)
                    else:
                        self._data = [value]
                        self._data_size = len(value)
                # Comments (":"), `event:`, `id:` and `retry:` carry nothing a completion relay needs.
            elif self._data:
                payload = b"\n".join(self._data) if len(self._data) > 1 else self._data[0]
                self.work += len(payload)
                self._data = []
                if payload == DONE:
                    self.done = True
                    return events
                if payload:  # an event with empty data is not dispatched
                    events.append(payload)
        if len(tail) > limit:
            raise EventTooLarge(limit)
        return events

    def _named_events(self, chunk: bytes) -> list[bytes] | None:
        """The other common case (Anthropic's): an `event: …` line then one `data: …` line per event."""
        self.work += 3 * len(chunk)
        if b"\r" in chunk:
            return None
        events: list[bytes] = []
        for block in chunk[:-2].split(b"\n\n"):
            name, data, payload = block.partition(b"\ndata: ")
            if not data or not name.startswith(b"event: ") or b"\n" in name or b"\n" in payload:
                return None
            if payload == DONE:
                self.done = True
                return events
            if payload:  # an event with empty data is not dispatched
                events.append(payload)
        return events

    def _single_line_events(self, chunk: bytes) -> list[bytes] | None:
        """The common case, one `data: …` line per event, without line-by-line parsing."""
        self.work += 3 * len(chunk)
        if b"\r" in chunk:
            return None
        events = []
        for block in chunk[:-2].split(b"\n\n"):
            if not block.startswith(b"data: ") or b"\n" in block:
                return None
            events.append(block[6:])
        if DONE in events:
            self.done = True
            events = events[: events.index(DONE)]
        if b"" in events:  # an event with empty data is not dispatched (rare: not worth a pass each read)
            events = [event for event in events if event]
        return events
