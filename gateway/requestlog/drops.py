"""What the request log could not store: counted by reason (`gateway_request_log_dropped_total`)
and said in one log line a minute at most, so that a dead database costs a counter and a line,
never a flood of them.

Reasons: `queue_full` (the writer is behind: the store is slow or down), `store_error` (the store
refused a batch it was reachable for), `shutdown` (still queued when the process stopped).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from gateway.observability.metrics import REQUEST_LOG_DROP_REASONS as REASONS

log = logging.getLogger(__name__)
LOG_INTERVAL_S = 60.0


class Drops:
    def __init__(self, count: Callable[[str, int], None] | None = None, interval_s: float = LOG_INTERVAL_S) -> None:
        """`count(reason, records)`: the metric, when there is one."""
        self._count = count
        self._interval_s = interval_s
        self.totals = dict.fromkeys(REASONS, 0)
        self._unlogged = dict.fromkeys(REASONS, 0)
        self._logged_at = -interval_s
        self.problem = ""  # the store's last failure, for the next line

    def add(self, reason: str, records: int = 1) -> None:
        self.totals[reason] += records
        self._unlogged[reason] += records
        if self._count is not None:
            self._count(reason, records)
        self._maybe_log()

    def store_failed(self, problem: str, *, retried: bool) -> None:
        """The store could not take a batch (`retried`: it is kept and tried again): said once, then
        with the lines of what is dropped."""
        first = not self.problem
        self.problem = problem
        if first:
            then = "records wait in the queue and are tried again" if retried else "that batch is lost"
            log.warning("request log: the store failed (%s); %s", problem, then)

    def store_recovered(self) -> None:
        if self.problem:
            log.warning("request log: the store answers again; writing resumed")
            self.problem = ""

    def flush_log(self) -> None:
        """At shutdown: say what was dropped since the last line."""
        self._logged_at = -self._interval_s
        self._maybe_log()

    def _maybe_log(self) -> None:
        now = time.monotonic()
        if now - self._logged_at < self._interval_s or not any(self._unlogged.values()):
            return
        self._logged_at = now
        counts = ", ".join(f"{reason}: {n}" for reason, n in self._unlogged.items() if n)
        self._unlogged = dict.fromkeys(REASONS, 0)
        cause = f"; the store: {self.problem}" if self.problem else ""
        log.warning(
            "request log: records dropped (%s)%s; counted in gateway_request_log_dropped_total, "
            "at most one such line a minute",
            counts,
            cause,
        )
