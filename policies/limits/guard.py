"""Counting a shared store's failures and logging them once per interval, not once per request."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import MaxConnectionsError, RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from policies.redis_pool import PoolExhausted
from policies.redis_sentinel import SentinelAuthenticationError

# What a Redis call raises when the server is down, slow or refuses: never anything else is caught.
STORE_FAILURES: tuple[type[Exception], ...] = (RedisError, OSError)  # TimeoutError is an OSError


def is_outage(exc: BaseException) -> bool:
    """Redis cannot be reached: a refused or broken connection, or no answer in time. Not an
    outage: a script or command error (Redis answered), a full connection pool (this process is
    overloaded), or anything else; those must never be read as "serve without limits"."""
    if isinstance(exc, (PoolExhausted, MaxConnectionsError)):
        return False
    return isinstance(exc, (RedisConnectionError, RedisTimeoutError, OSError))


class FailureLog:
    def __init__(
        self,
        what: str,
        consequence: str,
        *,
        logger: logging.Logger,
        interval_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.errors = 0  # every failure, for metrics
        self._what = what
        self._consequence = consequence
        self._log = logger
        self._interval_s = interval_s
        self._clock = clock
        self._last = -math.inf
        self._logged_at_errors = 0

    def failed(self, exc: Exception) -> None:
        self.errors += 1
        now = self._clock()
        if now - self._last < self._interval_s:
            return
        self._last = now
        since, self._logged_at_errors = self.errors - self._logged_at_errors, self.errors
        self._log.error(
            "%s failed (%s); %s. %d failure(s) since the last report, %d in all",
            self._what,
            _described(exc),
            self._consequence,
            since,
            self.errors,
        )


def _described(exc: Exception) -> str:
    """The exception's type only, since its text may quote a Redis URL with a password in it; but
    the whole text of a failure the gateway words itself, naming the settings to fix and never
    their values (Sentinels that refuse its credentials)."""
    if isinstance(exc, SentinelAuthenticationError):
        return f"{type(exc).__name__}: {exc}"
    return type(exc).__name__
