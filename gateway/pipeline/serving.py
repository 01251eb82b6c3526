"""The live config and its reloads: by request header (rate limited), SIGHUP, or a file change.

A reload reads and parses the file in a thread (never on the event loop), builds a whole new
generation (keys, deployments, routing) beside the current one and swaps it in one assignment; a
file that fails to load is logged and the old config keeps serving. Requests hold the generation
they started with until they finish, and providers that the new config no longer uses are closed
once the last of those requests is done.

With `--workers N` a header-triggered reload reaches every worker: the worker that got it signals
its parent (`Supervisor`), which forwards SIGHUP to all the workers as it does with its own, and
the request waits for its own worker's reload. The requests' own work runs in tasks kept here
(`spawn`), which shutdown waits for before it closes anything they use: for up to
`server.shutdown_grace_s` (`drain`), after which those still running are ended (a stream with an
error event, see `exchange.ClientScope.shut`) and wrap up (settlement, cache write, record).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections import Counter
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from gateway.config.loader import ConfigError, LoadedConfig
from gateway.pipeline.assembly import Generation, SharedState, build_generation
from gateway.pipeline.exchange import ClientScope
from gateway.pipeline.flow import Pipeline
from providers.base import Provider

log = logging.getLogger(__name__)

Loader = Callable[[], LoadedConfig]
T = TypeVar("T")
# How long a worker waits for the SIGHUP its parent forwards before it reloads on its own.
SUPERVISOR_WAIT_S = 5.0
# After the shutdown grace: how long the requests it ended may take to send their error and settle.
WRAP_UP_S = 5.0


class ServingState:
    def __init__(self, initial: LoadedConfig, shared: SharedState, loader: Loader | None) -> None:
        self.shared = shared
        self._loader = loader
        self.current = build_generation(initial, shared, {})
        # Providers by identity, and how many live generations use each: shared ones outlive a reload.
        self._open: dict[int, Provider] = {id(p): p for p in self.current.providers.values()}
        self._users: Counter[int] = Counter(self._open.keys())
        self._lock = asyncio.Lock()
        self._last_header_reload = float("-inf")
        self._closing: set[asyncio.Task[Any]] = set()
        self._work: set[asyncio.Task[Any]] = set()  # requests' work, awaited at shutdown
        self._scopes: dict[asyncio.Task[Any], ClientScope] = {}  # what ends each at the grace's end
        self._sighup_waiters: list[asyncio.Future[None]] = []  # header reloads waiting for the forwarded SIGHUP
        self._listening = False  # SIGHUP reaches this worker's loop
        self.reloads = 0

    def hold(self) -> _Held:
        """`with serving.hold() as pipeline:` the current pipeline, kept alive (its providers
        open) until the block exits."""
        return _Held(self, self.current)

    def spawn(self, work: Coroutine[Any, Any, T], scope: ClientScope | None = None) -> asyncio.Task[T]:
        """Run a request's work in a task of its own, which shutdown waits for (and ends through
        `scope` once the grace is over)."""
        task = asyncio.get_running_loop().create_task(work)
        self._work.add(task)
        task.add_done_callback(self._work.discard)
        if scope is not None:
            self._scopes[task] = scope
            task.add_done_callback(self._forget_scope)
        return task

    def _forget_scope(self, task: asyncio.Task[Any]) -> None:
        self._scopes.pop(task, None)

    async def drain(self, grace_s: float) -> None:
        """Shutdown (the listener is closed): let the requests in flight finish, for up to
        `grace_s`; then end those still running (a stream with an error event, any other a 503)
        and give them `WRAP_UP_S` to send it and settle."""
        if self._work:
            log.info("shutting down: waiting up to %.0f s for %d requests in flight", grace_s, len(self._work))
            await asyncio.wait(set(self._work), timeout=grace_s)
        if not self._work:
            return
        log.warning("shutdown grace of %.0f s over: ending %d requests still in flight", grace_s, len(self._work))
        for task in list(self._work):
            scope = self._scopes.get(task)
            if scope is not None:
                scope.shut()
        await asyncio.wait(set(self._work), timeout=WRAP_UP_S)

    async def reload_for_request(self) -> None:
        """`x-gateway-refresh-config: true` (from an authenticated caller): reload, unless one
        happened less than the interval ago. Under a parent with several workers, every worker
        reloads (the parent forwards SIGHUP to each) and this returns once this worker has."""
        interval = self.current.loaded.config.routing.reload.header_min_interval_s
        now = self.shared.timing.clock()
        if now - self._last_header_reload < interval:
            return
        self._last_header_reload = now
        reason = "the x-gateway-refresh-config header"
        if self._loader is not None and self._listening and await self._reload_every_worker():
            return
        await self.reload(reason)

    async def _reload_every_worker(self) -> bool:
        """Ask the parent to forward SIGHUP to every worker, and wait for this worker's reload.
        False when there is no parent to ask, or it did not answer in time (then the caller reloads)."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._sighup_waiters.append(waiter)
        if Supervisor.ask_for_reload():
            try:
                await asyncio.wait_for(asyncio.shield(waiter), SUPERVISOR_WAIT_S)
                return True
            except TimeoutError:
                log.warning(
                    "the parent process did not forward the reload within %.0f s; reloading here", SUPERVISOR_WAIT_S
                )
        if waiter in self._sighup_waiters:
            self._sighup_waiters.remove(waiter)
        return False

    async def reload(self, reason: str) -> bool:
        if self._loader is None:
            log.info("config reload asked for by %s, but the config was not loaded from a file", reason)
            return False
        async with self._lock:
            try:
                loaded = await asyncio.to_thread(self._loader)  # reading and parsing: off the event loop
            except ConfigError as exc:
                log.error("config reload (%s) rejected; the previous config keeps serving:\n%s", reason, exc.report())
                return False
            self._swap(loaded)
        self.reloads += 1
        log.info("config reloaded from %s (%s)", loaded.source, reason)
        return True

    def _swap(self, loaded: LoadedConfig) -> None:
        old = self.current
        for warning in loaded.warnings:
            log.warning("%s", warning)
        for section in ("server", "redis", "cache", "admin", "limits"):
            if getattr(loaded.config, section) != getattr(old.loaded.config, section):
                log.warning("config reload: changes to the '%s' section take effect after a restart", section)
        new = build_generation(loaded, self.shared, old.providers)
        self._users.update(id(p) for p in new.providers.values())
        self._open.update((id(p), p) for p in new.providers.values())
        self.current = new
        old.retired = True
        if old.in_flight == 0:
            self._release(old)

    def _release(self, generation: Generation) -> None:
        """The generation is retired and drained: close the providers no live generation uses."""
        unused: list[Provider] = []
        for provider in generation.providers.values():
            self._users[id(provider)] -= 1
            if self._users[id(provider)] <= 0:
                del self._users[id(provider)]
                unused.append(self._open.pop(id(provider)))
        generation.providers = {}
        if unused:
            task = asyncio.get_running_loop().create_task(_close_all(unused))
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    async def watch(self, path: str) -> None:
        """Reload whenever the file's size or modification time changes (polling: no extra dependency)."""
        last = _signature(path)
        while True:
            settings = self.current.loaded.config.routing.reload
            await asyncio.sleep(settings.poll_interval_s)
            seen = _signature(path)
            if seen != last and settings.watch:  # a reload may have turned watching off
                last = seen
                await self.reload(f"a change to {path}")

    def listen_for_sighup(self) -> bool:
        try:
            asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, self._on_sighup)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no signals here
            return False
        self._listening = True
        if EarlySighup.take():  # it may have come after this worker read its config
            self._on_sighup()
        return True

    def _on_sighup(self) -> None:
        waiters, self._sighup_waiters = self._sighup_waiters, []  # this reload starts after they asked
        task = asyncio.get_running_loop().create_task(self.reload("SIGHUP"))
        self._closing.add(task)  # keep a reference until it finishes
        task.add_done_callback(self._closing.discard)
        task.add_done_callback(lambda _: _release_waiters(waiters))

    async def aclose(self) -> None:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
        self._listening = False
        # Requests' settlement, cache writes and records finish before anything closes, within a
        # bound: one stuck on a peer that never answers must not keep the process from exiting.
        for tasks in (self._work, self._closing):
            if tasks:
                await asyncio.wait(set(tasks), timeout=WRAP_UP_S)
            if tasks:
                log.warning("closing: cancelling %d tasks still running after %.0f s", len(tasks), WRAP_UP_S)
                for task in list(tasks):
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
        await self.shared.cache.drain()  # shared streams still reading use providers
        await _close_all(list(self._open.values()))
        self._open.clear()
        await self.shared.aclose()


class EarlySighup:
    """A worker process remembers a SIGHUP that arrives while it starts (the parent forwards every
    one it gets), and reloads once it listens: otherwise that worker would keep the old config."""

    pending = False

    @classmethod
    def remember(cls) -> None:
        signal.signal(signal.SIGHUP, cls._latch)

    @classmethod
    def take(cls) -> bool:
        pending, cls.pending = cls.pending, False
        return pending

    @classmethod
    def _latch(cls, _signum: int, _frame: object) -> None:
        cls.pending = True


class Supervisor:
    """The parent of this worker under `--workers N`: it forwards every SIGHUP it gets to all its
    workers. A worker asks it for a reload of every worker by sending it SIGHUP."""

    pid: int | None = None

    @classmethod
    def adopt(cls, parent: int) -> None:
        cls.pid = parent

    @classmethod
    def ask_for_reload(cls) -> bool:
        parent = cls.pid
        if parent is None or os.getppid() != parent:  # not a worker, or its parent is gone
            return False
        try:
            os.kill(parent, signal.SIGHUP)
        except OSError:
            return False
        return True


def _release_waiters(waiters: list[asyncio.Future[None]]) -> None:
    for waiter in waiters:
        if not waiter.done():
            waiter.set_result(None)


def _signature(path: str) -> tuple[int, int] | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size


async def _close_all(providers: list[Provider]) -> None:
    for provider in providers:
        await provider.aclose()


class _Held:
    """One request's hold on a generation (a class, not a generator-based context manager: it
    runs on every request)."""

    __slots__ = ("_generation", "_serving")

    def __init__(self, serving: ServingState, generation: Generation) -> None:
        self._serving = serving
        self._generation = generation

    def __enter__(self) -> Pipeline:
        self._generation.in_flight += 1
        return self._generation.pipeline

    def __exit__(self, *exc_info: object) -> None:
        generation = self._generation
        generation.in_flight -= 1
        if generation.retired and generation.in_flight == 0:
            self._serving._release(generation)
