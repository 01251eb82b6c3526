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
                events.append(payload)
        return events

    def _field(self, line: bytes) -> None:
        if line.startswith(b"data:"):
            value = line[5:]
            self._data.append(value[1:] if value.startswith(b" ") else value)
        # Comments (":"), `event:`, `id:` and `retry:` carry nothing a completion relay needs.
