"""Where the access log's writer thread puts its lines: standard error or a file, in batches.

The thread writes each line of a batch as it renders it and flushes once per batch: under load one
write call carries many lines. A file that logrotate
moved is reopened between batches (what `WatchedFileHandler` checks, once per batch, not per line).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
from logging.handlers import QueueListener, WatchedFileHandler
from typing import Any, Protocol, TextIO


class BatchedOutput(Protocol):
    def handle(self, record: logging.LogRecord) -> bool | logging.LogRecord: ...

    def end_batch(self) -> None: ...

    def close(self) -> None: ...


class BatchedFile(WatchedFileHandler):
    def emit(self, record: logging.LogRecord) -> None:
        if self.stream is None:
            self.stream = self._open()
        self.stream.write(self.format(record) + self.terminator)

    def end_batch(self) -> None:
        self.flush()
        self.reopenIfNeeded()


class BatchedStream(logging.StreamHandler[TextIO]):
    """Standard error through a buffer of its own (Python's stderr flushes at every newline)."""

    def __init__(self) -> None:
        stream: TextIO = sys.stderr
        with contextlib.suppress(AttributeError, OSError, io.UnsupportedOperation):
            stream = open(os.dup(sys.stderr.fileno()), "w", buffering=1 << 16, encoding="utf-8")  # noqa: SIM115
        self._owned = stream is not sys.stderr
        super().__init__(stream)

    def emit(self, record: logging.LogRecord) -> None:
        self.stream.write(self.format(record) + self.terminator)

    def end_batch(self) -> None:
        self.flush()

    def close(self) -> None:
        self.flush()
        if self._owned:
            self.stream.close()
        super().close()


class Listener(QueueListener):
    """The standard library's queue listener, fed batches of the requests' records: each log record
    is built here, in the writer thread, and the output flushed once per batch."""

    def __init__(self, queue: Any, output: BatchedOutput) -> None:
        super().__init__(queue, output)  # type: ignore[arg-type]
        self._output = output

    def prepare(self, record: Any) -> logging.LogRecord:
        return logging.LogRecord("gateway.access", logging.INFO, "", 0, record, None, None)

    def handle(self, batch: Any) -> None:
        for record in batch:
            super().handle(record)
        self._output.end_batch()
