"""What of a completion request its client's departure may cancel, and what it may not.

aiohttp runs the gateway with `handler_cancellation`: a client that closes its connection cancels
its handler. So the handler only waits (`outlive_client`): the request's work runs in a task of
its own (`ServingState.spawn`, drained at shutdown), and a departure cancels that task only while
it is inside a `ClientScope.cancellable()` stretch: the upstream call and the relay of its answer.
What follows that stretch (the limits' settlement, the cache write, the request's record for the
metrics and the access log) completes whether the client stays or goes.

A request whose client left before it had the whole answer is answered (to nobody) with status
499 and the headers it would have had, so the metrics and the access log count it under the
deployment it reached.

At shutdown, a request still running when `server.shutdown_grace_s` is over is ended the same way
(`ClientScope.shut`), but its client is still there: a stream gets an error event in the OpenAI
envelope (`ShuttingDown`) and its clean end, any other request a 503; both settle as usual.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from aiohttp import web

from gateway.api.errors import CLIENT_CLOSED, GatewayError


def _carried(name: str) -> bool:
    """The gateway's own headers (who served, cache status, limits), not those of the transfer."""
    lowered = name.lower()
    return lowered.startswith("x-") and lowered != "x-accel-buffering"


class ShuttingDown(GatewayError):
    status = 503
    type = "service_unavailable"
    code = "shutting_down"

    def __init__(self) -> None:
        super().__init__(
            "The gateway is shutting down and this request outlasted its grace (server.shutdown_grace_s); retry it."
        )


class Framing(Protocol):
    """How a stream's events are written for a client API that is not chat's SSE (the Messages
    API's events): one per stream, as it holds the translation's state."""

    def frames(self, payloads: list[bytes]) -> bytes: ...

    def last(self) -> bytes:
        """What follows the upstream's last event, when the stream ended well."""
        ...

    def error(self, error: GatewayError) -> bytes:
        """The event that ends a stream failing after it began."""
        ...


class ClientScope:
    def __init__(
        self,
        headers: dict[str, str],
        first_byte: Callable[[], None] = lambda: None,
        stream_failed: Callable[[str], None] = lambda code: None,
    ) -> None:
        self.headers = headers  # who the answer is from, as far as known: for a 499's record
        # Called when a stream's headers and first event go out (its time to first token): by the
        # relay itself, which is cheaper than a response-prepare signal that every answer would send.
        self.first_byte = first_byte
        # Called with the error's code when a stream already answered 200 ends with an error event.
        self.stream_failed = stream_failed
        self.framing: Framing | None = None  # None: chat's and completions' own SSE frames
        self.gone = False  # the client went away
        self.cut = False  # the gateway is shutting down and the grace is over: end the request
        self.delivered = False  # the whole answer went to the relay (a stream's last frame follows)
        self.task: asyncio.Task[Any] | None = None  # cancelled when the client leaves: set within a stretch
        self._settle: Callable[[], Awaitable[None]] | None = None
        self._settle_after: list[Callable[[], Awaitable[None]]] = []
        self._settled = False

    def cancellable(self) -> ClientScope:
        """`with scope.cancellable():` a stretch that the client's departure cancels (at once if it
        already left). The scope is its own context manager: cheaper than a generator-based one."""
        return self

    def __enter__(self) -> None:
        if self.gone or self.cut:
            raise asyncio.CancelledError
        self.task = asyncio.current_task()

    def __exit__(self, *exc_info: object) -> None:
        self.task = None

    def leave(self) -> None:
        """The client went away: cancel the stretch it is waiting on, if any."""
        self.gone = True
        task, self.task = self.task, None
        if task is not None:
            task.cancel()

    def shut(self) -> None:
        """The shutdown grace is over: end the stretch in progress (and any later one), the client
        being still there (`ShuttingDown`)."""
        self.cut = True
        task, self.task = self.task, None
        if task is not None:
            task.cancel()

    def settles_with(self, settle: Callable[[], Awaitable[None]]) -> None:
        self._settle = settle

    def settle_after(self, wait: Callable[[], Awaitable[None]]) -> None:
        """Settle only once `wait()` returned (a shared stream's call: its usage is final then)."""
        self._settle_after.append(wait)

    async def settle(self) -> None:
        """Charge the call's usage and free its slots, once (as soon as it is known, so a client
        that saw the end of its answer finds them free)."""
        if self._settled:
            return
        self._settled = True
        for wait in self._settle_after:
            await wait()
        if self._settle is not None:
            await self._settle()

    def departed(self, headers: Mapping[str, str] | None = None) -> web.Response:
        """The answer recorded for a client that left before it had the whole answer."""
        carried = {name: value for name, value in (headers or self.headers).items() if _carried(name)}
        return web.Response(status=CLIENT_CLOSED, headers=carried)


async def outlive_client(work: asyncio.Task[web.StreamResponse], scope: ClientScope) -> web.StreamResponse:
    """Wait for the request's work to finish, whatever happens to this handler; a cancellation of
    the handler (its client left) cancels only the work's cancellable stretch."""
    while True:
        try:
            response = await asyncio.shield(work)
        except asyncio.CancelledError:
            uncancel()
            if not work.done():  # the handler was cancelled: the client went away
                scope.leave()
                continue
            if not work.cancelled():  # the work finished as the handler was cancelled
                continue
            if scope.cut and not scope.gone:
                raise ShuttingDown() from None  # stopped at shutdown, its client still waiting
            return scope.departed()  # the work stopped where the client left
        if scope.gone and not scope.delivered:
            return scope.departed(response.headers)
        return response


def uncancel() -> None:
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        task.uncancel()
