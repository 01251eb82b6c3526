"""Run the app in one process, or in N forked worker processes sharing the port (SO_REUSEPORT).

Before anything starts, the addresses are tried once without SO_REUSEPORT: a port held by any
other process (another gateway included, whose workers would otherwise share it silently) is a
`ListenError` naming it, raised in the parent, instead of N workers failing each on its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import gc
import logging
import os
import signal
import socket
import sys
import traceback
from collections.abc import Callable, Sequence

from aiohttp import web

from gateway.config.errors import ListenError
from gateway.config.settings import DEFAULT_BACKLOG
from gateway.pipeline.serving import EarlySighup, Supervisor

log = logging.getLogger(__name__)


def use_uvloop() -> None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency, but optional in spirit
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


_CANNOT_BIND = frozenset({errno.EADDRINUSE, errno.EACCES, errno.EADDRNOTAVAIL})


def check_can_listen(host: str, port: int, *, port_option: str = "--port") -> None:
    """Bind host:port (every address it resolves to) and let go: a ListenError if that fails.
    Port 0 (any free port) always can."""
    if port == 0:
        return
    try:
        resolved = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ListenError(host, port, exc, port_option=port_option) from None
    for family, kind, proto, _, address in resolved:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as asyncio does: TIME_WAIT is no conflict
            if family == socket.AF_INET6:
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                probe.bind(address)
            except OSError as exc:
                raise ListenError(host, port, exc, port_option=port_option) from None


# At SIGTERM the app's own shutdown step waits for the requests in flight (`server.shutdown_grace_s`)
# and ends those that outlast it; aiohttp then gives any other handler still running this long
# (instead of its default 60 s) before it cancels it.
HANDLER_SHUTDOWN_S = 5.0

# The request path allocates many short-lived containers; at CPython's default first-generation
# threshold (700) the cyclic GC runs every few requests, walking survivors each time.
GC_THRESHOLDS = (50_000, 20, 20)


async def freeze_startup_heap(_app: web.Application) -> None:
    """What start-up built (modules, config, providers, pools) lives as long as the process: move it
    out of the cyclic GC's reach (`gc.freeze`), and collect the young generation less often."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def serve(
    make_app: Callable[[], web.Application],
    host: str,
    port: int,
    *,
    reuse_port: bool = False,
    backlog: int = DEFAULT_BACKLOG,
) -> None:
    use_uvloop()
    app = make_app()
    app.on_startup.append(freeze_startup_heap)  # last: after every start-up step of the app's own
    try:
        web.run_app(
            app,
            host=host,
            port=port,
            reuse_port=reuse_port,
            backlog=backlog,  # aiohttp's default (128) overflows in a burst of new connections
            access_log=None,  # the structured access log is written off the hot path instead
            handler_cancellation=True,  # a client that disconnects cancels its upstream call at once
            shutdown_timeout=HANDLER_SHUTDOWN_S,
            print=lambda message: log.info("%s", message.strip()),
        )
    except ListenError:
        raise
    except OSError as exc:  # taken between the check and the bind
        if exc.errno in _CANNOT_BIND:
            raise ListenError(host, port, exc) from None
        raise


def serve_workers(
    make_app: Callable[[], web.Application],
    host: str,
    port: int,
    workers: int,
    *,
    on_worker_exit: Callable[[int], None] | None = None,
    metrics_listener: Sequence[tuple[str, int]] = (),
    on_error: Callable[[BaseException], int] | None = None,
    backlog: int = DEFAULT_BACKLOG,
    announce: Callable[[], None] = lambda: None,
) -> int:
    """Fork `workers` processes that each bind host:port with SO_REUSEPORT (each listening socket
    with its own `backlog`); the kernel spreads connections across them. Returns the exit status
    once they have all stopped.
    `on_worker_exit(pid)`: called in the parent as each worker is reaped (metrics bookkeeping).
    `metrics_listener`: the metrics' own address, if any, checked with the main one before start.
    `on_error(exc)`: in a worker that fails, reports the error and gives its exit status
    (default: the traceback, status 1). With one worker, errors are raised to the caller.
    `announce()`: once the addresses are known to be free, before serving (the start-up banner)."""
    check_can_listen(host, port)
    for metrics_host, metrics_port in metrics_listener:
        check_can_listen(metrics_host, metrics_port, port_option="observability.metrics.port")
    announce()
    if workers == 1:
        serve(make_app, host, port, backlog=backlog)
        return 0
    children: list[int] = []
    parent = os.getpid()

    def stop(signum: int, _frame: object) -> None:
        for child in children:
            _kill(child, signal.SIGTERM)

    def reload(signum: int, _frame: object) -> None:
        if os.getpid() != parent:  # a new worker that does not listen yet: it reloads once it does
            EarlySighup.pending = True
            return
        for child in children:  # each worker reloads its own copy of the config
            _kill(child, signal.SIGHUP)

    # Before the first fork: a worker may ask for a reload (a refresh header) by signalling the
    # parent, and SIGHUP's default action would end the parent.
    signal.signal(signal.SIGHUP, reload)
    for _ in range(workers):
        pid = os.fork()
        if pid == 0:  # child
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
            EarlySighup.remember()  # until the app listens for it: a reload, not an exit
            Supervisor.adopt(parent)  # a refresh header asks the parent to reload every worker
            os._exit(_run_worker(make_app, host, port, on_error, backlog))
        children.append(pid)
    log.info("started %d workers on %s:%d: %s", workers, host, port, children)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    status = _reap(children, lambda: stop(signal.SIGTERM, None), on_worker_exit)
    sys.stdout.flush()
    return status


def _run_worker(
    make_app: Callable[[], web.Application],
    host: str,
    port: int,
    on_error: Callable[[BaseException], int] | None,
    backlog: int,
) -> int:
    """A worker's exit status: 0 once it stopped serving, else what `on_error` makes of its failure."""
    try:
        serve(make_app, host, port, reuse_port=True, backlog=backlog)
        status = 0
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else 1
    except BaseException as exc:  # a forked worker must never unwind into the parent's code
        if on_error is not None:
            status = on_error(exc)
        else:
            traceback.print_exception(exc)
            status = 1
    sys.stdout.flush()
    sys.stderr.flush()
    return status


def _reap(children: list[int], stop_all: Callable[[], None], on_worker_exit: Callable[[int], None] | None) -> int:
    """Wait for every worker; the first that fails stops the others. Returns the exit status."""
    status = 0
    while children:
        pid, wait_status = os.wait()
        code = os.waitstatus_to_exitcode(wait_status)  # negative: killed by that signal
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
