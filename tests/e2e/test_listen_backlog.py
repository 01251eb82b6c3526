"""`server.backlog`: the connections the kernel completes and holds while the gateway is busy. With
aiohttp's default (128) a burst of new connections overflowed the queue, and the kernel dropped or
reset the rest; each listening socket, one per worker, now holds 2,048 (capped by the kernel)."""

from __future__ import annotations

import asyncio
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.test_serve_process import GATEWAY, free_port, wait_until_listening

SAFETY_S = 20.0  # what a test waits at most for what must happen, before it fails instead of hanging
BURST = 1_000  # connections at once: far past aiohttp's default backlog, within the gateway's
SOMAXCONN = int(Path("/proc/sys/net/core/somaxconn").read_text())
MOCK = {"name": "mock", "provider": {"type": "mock"}}


def listening_backlogs(port: int) -> list[tuple[int, int]]:
    """(queued, backlog) of each socket listening on the port: `ss` shows a listening socket's
    accept queue as Recv-Q and its backlog as Send-Q."""
    shown = subprocess.run(  # noqa: S603 - a fixed command line
        ["ss", "-ltnH", f"sport = :{port}"],  # noqa: S607 - ss from the system's PATH
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [(int(line.split()[1]), int(line.split()[2])) for line in shown.splitlines()]


async def until(condition: Any) -> None:
    for _ in range(int(SAFETY_S / 0.05)):
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"not true within {SAFETY_S}s")


def start_gateway(tmp_path: Path, port: int, **server: Any) -> subprocess.Popen[bytes]:
    """`gateway serve`, its output in a file (a thousand access-log lines would fill a pipe)."""
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"server": {"port": port, **server}, "deployments": [MOCK]}))
    with (tmp_path / "gateway.log").open("wb") as output:
        return subprocess.Popen(  # noqa: S603 - our own console script
            [str(GATEWAY), "serve", "-c", str(path), "--log-level", "WARNING"], stdout=output, stderr=output
        )


async def stop(process: subprocess.Popen[bytes]) -> int:
    process.send_signal(signal.SIGCONT)
    process.send_signal(signal.SIGTERM)
    return await asyncio.to_thread(process.wait, SAFETY_S)


@pytest.mark.parametrize(
    ("server", "expected"),
    [
        pytest.param({}, [min(2048, SOMAXCONN)], id="default"),
        pytest.param({"workers": 2, "backlog": 300}, [300, 300], id="two-workers-each-its-own"),
    ],
)
async def test_each_listening_socket_has_the_configured_backlog(
    tmp_path: Path, server: dict[str, Any], expected: list[int]
) -> None:
    port = free_port()
    process = start_gateway(tmp_path, port, **server)
    try:
        await wait_until_listening(port, process)
        await until(lambda: len(listening_backlogs(port)) == len(expected))  # every worker listens
        backlogs = [backlog for _, backlog in listening_backlogs(port)]
    finally:
        await stop(process)
    assert backlogs == expected


async def test_a_burst_of_connections_is_held_while_the_gateway_is_busy_and_then_served(tmp_path: Path) -> None:
    """The gateway is stopped (SIGSTOP: as busy as it can be) while 1,000 clients connect at once:
    the kernel completes every handshake and queues it, and once the gateway runs again each
    connection's request is answered. With a backlog of 128 the 130th connection would wait for
    a slot that never comes while the gateway is stopped (its SYN dropped, a listen overflow)."""
    port = free_port()
    process = start_gateway(tmp_path, port)
    try:
        await wait_until_listening(port, process)
        process.send_signal(signal.SIGSTOP)
        opening = asyncio.gather(*(asyncio.open_connection("127.0.0.1", port) for _ in range(BURST)))
        connections = await asyncio.wait_for(opening, SAFETY_S)
        [(queued, backlog)] = listening_backlogs(port)
        assert queued >= BURST  # all of them queued (and wait_until_listening's probe, if not accepted yet)
        assert backlog == min(2048, SOMAXCONN)

        for _, writer in connections:
            writer.write(b"GET /health HTTP/1.1\r\nHost: gateway\r\nConnection: close\r\n\r\n")
        process.send_signal(signal.SIGCONT)
        answers = await asyncio.wait_for(asyncio.gather(*(reader.read() for reader, _ in connections)), SAFETY_S)
        for _, writer in connections:
            writer.close()
    finally:
        code = await stop(process)

    assert [answer.split(b"\r\n", 1)[0] for answer in answers] == [b"HTTP/1.1 200 OK"] * BURST
    assert code == 0
