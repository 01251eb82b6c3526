"""Incremental Server-Sent Events decoder for upstream completion streams.

Fed raw network reads of any size, it returns the `data` payloads of every event completed so
far. Handles LF, CRLF and CR line endings (even split across reads), multi-line data,
comments and other fields, per the WHATWG event-stream grammar.
"""

from __future__ import annotations

DONE = b"[DONE]"


class SSEDecoder:
    __slots__ = ("_buffer", "_data", "done")

    def __init__(self) -> None:
        self._buffer = b""
        self._data: list[bytes] = []
        self.done = False  # the `data: [DONE]` sentinel was seen

    def feed(self, chunk: bytes) -> list[bytes]:
        """Consume one network read; return the payloads of the events it completed."""
        if not self._buffer and not self._data and chunk.startswith(b"data: ") and chunk.endswith(b"\n\n"):
            fast = self._single_line_events(chunk)
            if fast is not None:
                return fast
        buffer = self._buffer + chunk
        if b"\r" in buffer:
            # A trailing CR may be the first half of a CRLF split across reads: keep it for later.
            keep_cr = buffer.endswith(b"\r")
            if keep_cr:
                buffer = buffer[:-1]
            buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            if keep_cr:
                buffer += b"\r"
        *lines, self._buffer = buffer.split(b"\n")
        events: list[bytes] = []
        for line in lines:
            if line:
                self._field(line)
            elif self._data:
                payload = b"\n".join(self._data)
                self._data = []
                if payload == DONE:
                    self.done = True
                    return events
                if payload:  # an event with empty data is not dispatched
                    events.append(payload)
        return events

    def _single_line_events(self, chunk: bytes) -> list[bytes] | None:
        """The common case, one `data: …` line per event, without line-by-line parsing."""
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
        return [event for event in events if event]

    def _field(self, line: bytes) -> None:
        if line.startswith(b"data:"):
            value = line[5:]
            self._data.append(value[1:] if value.startswith(b" ") else value)
        # Comments (":"), `event:`, `id:` and `retry:` carry nothing a completion relay needs.
