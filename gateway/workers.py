"""Run the app in one process, or in N forked worker processes sharing the port (SO_REUSEPORT)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Callable

from aiohttp import web

from gateway.serving import EarlySighup

log = logging.getLogger(__name__)


def use_uvloop() -> None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency, but optional in spirit
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


def serve(make_app: Callable[[], web.Application], host: str, port: int, *, reuse_port: bool = False) -> None:
    use_uvloop()
    web.run_app(
        make_app(),
        host=host,
        port=port,
        reuse_port=reuse_port,
        access_log=None,  # the structured access log is written off the hot path instead
        handler_cancellation=True,  # a client that disconnects cancels its upstream call at once
        print=lambda message: log.info("%s", message.strip()),
    )


def serve_workers(
    make_app: Callable[[], web.Application],
    host: str,
    port: int,
    workers: int,
    *,
    on_worker_exit: Callable[[int], None] | None = None,
) -> int:
    """Fork `workers` processes that each bind host:port with SO_REUSEPORT; the kernel spreads
    connections across them. Returns the exit status once they have all stopped.
    `on_worker_exit(pid)`: called in the parent as each worker is reaped (metrics bookkeeping)."""
    if workers == 1:
        serve(make_app, host, port)
        return 0
    children: list[int] = []
    for _ in range(workers):
        pid = os.fork()
        if pid == 0:  # child
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
            EarlySighup.remember()  # until the app listens for it: a reload, not an exit
            try:
                serve(make_app, host, port, reuse_port=True)
            finally:
                os._exit(0)
        children.append(pid)
    log.info("started %d workers on %s:%d: %s", workers, host, port, children)

    def stop(signum: int, _frame: object) -> None:
        for child in children:
            _kill(child, signal.SIGTERM)

    def reload(signum: int, _frame: object) -> None:
        for child in children:  # each worker reloads its own copy of the config
            _kill(child, signal.SIGHUP)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGHUP, reload)
    status = _reap(children, lambda: stop(signal.SIGTERM, None), on_worker_exit)
    sys.stdout.flush()
    return status


def _reap(children: list[int], stop_all: Callable[[], None], on_worker_exit: Callable[[int], None] | None) -> int:
    """Wait for every worker; the first that fails stops the others. Returns the exit status."""
    status = 0
    while children:
        pid, code = os.wait()
        if pid in children:
            children.remove(pid)
            if on_worker_exit is not None:
                on_worker_exit(pid)
            if code != 0 and status == 0:
                log.error("worker %d exited with status %d; stopping the others", pid, code)
                status = 1
                stop_all()
    return status


def _kill(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)
