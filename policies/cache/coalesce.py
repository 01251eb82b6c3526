"""Single-flight: identical misses in flight at once make one upstream call (plain requests;
identical streamed requests share one live stream instead, see `broadcast`).

The first caller for a key is the leader and runs its own `produce`; callers arriving while it
runs are followers and wait for its outcome.

- The leader returns a value: every follower gets that same value.
- The leader raises an exception: every follower raises a copy of it (same type and message).
  Retrying by each follower would multiply the load on an upstream that is already failing, and
  the followers asked the same question at the same moment, so they share the answer.
- The leader is cancelled (its client disconnected) or stopped by a BaseException: the followers
  are not failed for another client's departure. They start again: the first to resume becomes
  the new leader and runs its own `produce`, the rest follow it.

A follower that is cancelled leaves the flight untouched (it waits through `asyncio.shield`). The
key is released as soon as the leader finishes, however it finishes, so nothing leaks; and no error
kept in a flight carries a traceback (whose frames hold the flight: a reference cycle, freed only
by the cyclic collector, which the gateway runs rarely).
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class _LeaderGone(Exception):
    """The leader stopped without an outcome: followers must start again."""


class SingleFlight(Generic[T]):
    def __init__(self) -> None:
        self._flights: dict[str, asyncio.Future[T]] = {}
        self.shared = 0  # followers served by another caller's call (for metrics)

    def __len__(self) -> int:
        """Keys with a call in flight."""
        return len(self._flights)

    async def run(self, key: str, produce: Callable[[], Awaitable[T]]) -> tuple[T, bool]:
        """`produce()`'s outcome, produced by this caller or shared with the one in flight.

        Returns (value, led): led is True when this caller's own `produce` made the value.
        """
        while True:
            flight = self._flights.get(key)
            if flight is None:
                return await self._lead(key, produce), True
            try:
                value = await asyncio.shield(flight)
            except _LeaderGone:
                continue
            except Exception as exc:  # raised here, it got a traceback whose frame holds the flight: a cycle
                raise copy_error(exc.with_traceback(None)) from None
            self.shared += 1
            return value, False

    async def _lead(self, key: str, produce: Callable[[], Awaitable[T]]) -> T:
        flight: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._flights[key] = flight
        try:
            value = await produce()
        except Exception as exc:
            flight.set_exception(copy_error(exc))  # a copy: this one's traceback holds this frame, and so the flight
            raise
        except BaseException:  # cancelled (client gone), or the process is stopping
            flight.set_exception(_LeaderGone())
            raise
        else:
            flight.set_result(value)
            return value
        finally:
            if self._flights.get(key) is flight:
                del self._flights[key]
            if flight.done() and not flight.cancelled():
                flight.exception()  # marks it retrieved: no "never retrieved" warning without followers


def copy_error(exc: Exception) -> Exception:
    """A follower's own copy, so followers do not share (and mutate) one traceback or headers dict."""
    try:
        clone = copy.copy(exc)
    except TypeError:  # an exception type that cannot be rebuilt from its args: share the instance
        return exc
    headers = getattr(exc, "headers", None)
    if isinstance(headers, dict):
        clone.headers = dict(headers)  # type: ignore[attr-defined]
    return clone
