"""Where the access log's writer thread puts its lines: standard error or a file, in batches.

The thread renders a batch's lines and writes them with one call and one flush. A file that
logrotate moved is reopened between batches (what `WatchedFileHandler` checks, once per batch, not
per line). The handlers are the standard library's for their streams; no `LogRecord` is built per
line, since nothing filters or formats these lines but the renderer.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
from collections.abc import Callable
from logging.handlers import QueueListener, WatchedFileHandler
from typing import Any, Protocol, TextIO


class BatchedOutput(Protocol):
    def write_lines(self, lines: list[str]) -> None: ...

    def close(self) -> None: ...


class BatchedFile(WatchedFileHandler):
    def write_lines(self, lines: list[str]) -> None:
        self.reopenIfNeeded()
        if self.stream is None:
            self.stream = self._open()
        self.stream.write("".join(lines))
        self.flush()


class BatchedStream(logging.StreamHandler[TextIO]):
    """Standard error through a buffer of its own (Python's stderr flushes at every newline)."""

    def __init__(self) -> None:
        stream: TextIO = sys.stderr
        with contextlib.suppress(AttributeError, OSError, io.UnsupportedOperation):
            stream = open(os.dup(sys.stderr.fileno()), "w", buffering=1 << 16, encoding="utf-8")  # noqa: SIM115
        self._owned = stream is not sys.stderr
        super().__init__(stream)

    def write_lines(self, lines: list[str]) -> None:
        self.stream.write("".join(lines))
        self.flush()

    def close(self) -> None:
        self.flush()
        if self._owned:
            self.stream.close()
        super().close()


class Listener(QueueListener):
    """The standard library's queue listener (its thread and stop protocol), fed batches of the
    requests' records: each batch is rendered here, in the writer thread, and written at once."""

    def __init__(self, queue: Any, output: BatchedOutput, render: Callable[[Any], str]) -> None:
        super().__init__(queue)
        self._output = output
        self._render = render

    def handle(self, batch: Any) -> None:
        self._output.write_lines([self._render(record) + "\n" for record in batch])
