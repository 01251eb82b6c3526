"""One upstream stream read once and shared, as it flows, by every identical streamed request
that arrives while it runs: the stream side of the single-flight in `coalesce`.

The first request starts the flight. A pump task that belongs to the flight (not to any request)
makes the upstream call with the first request's own `open` (its retries and fallbacks), reads
the stream once and keeps each read's payloads; every subscriber, the first included, gets them
all from the start and then live, so a request that joins late still gets the whole stream.

- The stream ends complete: the assembled answer is stored (`store`) before the subscribers are
  told the stream ended, so a client that saw the end and asks again gets a HIT.
- The call fails before the first event: every subscriber raises a copy of the error.
- The stream fails after it started: every subscriber gets the same events, then a copy of the error.
- Subscribers leave: while any remains the stream goes on for it; when the last one leaves before
  the upstream finished, the call is cancelled at once (its connection closed) and nothing is stored.

The flight is forgotten (`on_end`) as soon as it cannot take new subscribers: a request arriving
later starts its own (or, once the answer is stored, finds it in the cache).

Nothing here forms a reference cycle that outlives the flight: `on_end` is given the flight rather
than closing over it, and a stored error drops its traceback (whose frames hold the flight). A
cycle would keep the flight, every event it relayed and the request that started it until the
cyclic collector runs, which the gateway tunes to run rarely (`gateway.workers.GC_THRESHOLDS`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Generic, Protocol, TypeVar

import orjson

from policies.cache.assemble import StreamAssembler
from policies.cache.coalesce import copy_error

M = TypeVar("M")
log = logging.getLogger(__name__)


class Upstream(Protocol):
    """An open upstream stream (`providers.base.CompletionStream`)."""

    def __aiter__(self) -> AsyncIterator[list[bytes]]: ...

    async def aclose(self) -> None: ...


Open = Callable[[], Awaitable[tuple[Upstream, M]]]


class Abandoned(Exception):
    """Every subscriber left before the upstream finished: the call was cancelled."""


class SharedStream(Generic[M]):
    def __init__(
        self,
        open_: Open[M],
        *,
        assembler: StreamAssembler | None,
        store: Callable[[bytes], Awaitable[object]],
        on_end: Callable[[SharedStream[M]], None],
    ) -> None:
        loop = asyncio.get_running_loop()
        self._open = open_
        self._assembler = assembler
        self._store = store
        self._on_end = on_end
        self._batches: list[list[bytes]] = []
        self._changed = asyncio.Event()
        self._opened: asyncio.Future[M] = loop.create_future()
        self._error: Exception | None = None
        self._subscribers = 0
        self._reading = True  # opening or reading the upstream: what the last subscriber's departure cancels
        self.ended = False
        # The pump, until it is done: a cancelled task keeps its CancelledError, whose traceback's
        # frames hold this flight, so the flight lets go of its task when the pump ends.
        self.task: asyncio.Task[None] | None = loop.create_task(self._pump())

    @property
    def subscribers(self) -> int:
        return self._subscribers

    def subscribe(self, *, led: bool) -> Subscription[M]:
        self._subscribers += 1
        return Subscription(self, led)

    async def _pump(self) -> None:
        try:
            await self._run()
        except Exception:  # a bug, not an upstream failure (those are the subscribers' errors)
            log.exception("a shared stream failed")
            self._failed(self._error or Abandoned())
        finally:
            self._reading = False
            if not self._opened.done():
                self._opened.set_exception(self._error or Abandoned())
                self._opened.exception()  # retrieved: no "never retrieved" warning without subscribers
            self._end()
            self.task = None

    async def _run(self) -> None:
        try:
            upstream, meta = await self._open()
        except Exception as exc:
            self._failed(exc)
            return
        except BaseException:
            self._failed(Abandoned())
            raise
        self._opened.set_result(meta)
        body = None
        try:
            assembler = self._assembler
            async for payloads in upstream:
                if assembler is not None:
                    assembler.feed(payloads)
                self._batches.append(payloads)
                self._wake()
            answer = None if assembler is None else assembler.finish()
            body = None if answer is None else orjson.dumps(answer)
        except Exception as exc:  # a GatewayError: the stream broke (or ended without [DONE])
            self._failed(exc)
        except BaseException:
            self._failed(Abandoned())
            raise
        finally:
            self._reading = False
            await upstream.aclose()  # also settles the call's usage (a provider's own count)
        if body is not None:
            await self._store(body)

    def _failed(self, exc: Exception) -> None:
        """Keep the error for the subscribers (each raises a copy), without the traceback whose
        frames hold this flight: the flight is freed as soon as nothing uses it."""
        self._error = exc.with_traceback(None)
        exc.__context__ = None  # an error met while handling another keeps that one's traceback too

    def _end(self) -> None:
        if not self.ended:
            self.ended = True
            self._on_end(self)
            self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed.clear()  # the waiters already woken stay woken

    def _leave(self) -> None:
        self._subscribers -= 1
        if self._subscribers == 0 and self._reading and not self.ended:
            self._on_end(self)  # nobody may join a call being cancelled
            if self.task is not None:
                self.task.cancel()


class Subscription(Generic[M]):
    """One request's view of a shared stream: a `CompletionStream` (`aclose` leaves the flight)."""

    def __init__(self, flight: SharedStream[M], led: bool) -> None:
        self._flight = flight
        self.led = led  # this request's `open` makes the upstream call
        self._left = False

    async def opened(self) -> M:
        """What `open` returned, once the upstream's first event arrived; raises a copy of its error."""
        try:
            return await asyncio.shield(self._flight._opened)
        except Exception as exc:  # the flight's own error: raised here, it got a traceback that holds the flight
            raise copy_error(exc.with_traceback(None)) from None

    async def __aiter__(self) -> AsyncIterator[list[bytes]]:
        flight = self._flight
        index = 0
        while True:
            batches = flight._batches
            if index < len(batches):  # a subscriber that fell behind catches up in one write
                pending = batches[index:]
                index = len(batches)
                yield pending[0] if len(pending) == 1 else [payload for batch in pending for payload in batch]
                continue
            if flight.ended:
                break
            await flight._changed.wait()
        if flight._error is not None:
            raise copy_error(flight._error)

    async def aclose(self) -> None:
        self.leave()

    def leave(self) -> None:
        if not self._left:
            self._left = True
            self._flight._leave()

    async def ended(self) -> None:
        """Until the flight is over: the upstream call closed and its answer stored (or not)."""
        task = self._flight.task  # None once the pump is done
        if task is not None:
            await asyncio.wait({task})
