"""`gateway serve` as a separate process, as a user starts it: on a config file, a free loopback port
and an environment of the test's choosing, its output kept in a file the test may read (the access
log), stopped with SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import ExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path

GATEWAY = Path(sys.executable).with_name("gateway")
START_TIMEOUT_S = 120  # a loaded machine (or a local model's torch import) can take a while


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(frozen=True)
class ServedGateway:
    port: int
    output: Path  # everything the process wrote: start-up lines and the access log

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.root}/v1"

    def log(self) -> str:
        return self.output.read_text()


def _wait_until_healthy(process: subprocess.Popen[bytes], served: ServedGateway) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"the gateway exited with {process.returncode}:\n{served.log()}")
        try:
            with urllib.request.urlopen(f"{served.root}/health", timeout=5) as answer:  # noqa: S310 - loopback
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"the gateway did not answer /health within {START_TIMEOUT_S} s:\n{served.log()}")


@contextmanager
def serve(
    config: Path, output: Path, env: Mapping[str, str] | None = None, extra_args: Sequence[str] = ()
) -> Iterator[ServedGateway]:
    """`gateway serve -c CONFIG` on a free loopback port (`--host`, `--port` override the file's)."""
    served = ServedGateway(free_port(), output)
    command = [str(GATEWAY), "serve", "-c", str(config), "--host", "127.0.0.1", "--port", str(served.port)]
    with output.open("wb") as sink:
        process = subprocess.Popen(  # noqa: S603 - our own console script
            [*command, *extra_args],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"},
        )
    try:
        _wait_until_healthy(process, served)
        yield served
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@asynccontextmanager
async def serving(
    config: Path, output: Path, env: Mapping[str, str] | None = None, extra_args: Sequence[str] = ()
) -> AsyncIterator[ServedGateway]:
    """`serve` for an async test: starting and stopping wait in a thread, so the test's loop (and a
    loopback upstream it runs) keeps answering meanwhile."""
    with ExitStack() as stack:
        served = await asyncio.to_thread(stack.enter_context, serve(config, output, env, extra_args))
        try:
            yield served
        finally:
            await asyncio.to_thread(stack.close)
