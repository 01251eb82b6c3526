"""Helpers for the tests of streams that clients share or leave: an upstream stream held at a gate
(so a test decides when it goes on, without timing), and a raw-socket client that hangs up at a
chosen moment (right after `[DONE]`, or after the first event)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web
from aiohttp.test_utils import TestServer

from tests.support.fake_upstream import Behaviour, FakeUpstream, chunk, completion

DONE = b"data: [DONE]"
PIECES = ("shared ", "as ", "it ", "flows ")


@dataclass
class Gate:
    """An upstream stream that sends its first piece, then waits for `release` before the rest."""

    opened: asyncio.Event = field(default_factory=asyncio.Event)  # the first piece went out
    release: asyncio.Event = field(default_factory=asyncio.Event)
    finished: bool = False  # the whole answer went out (the gateway hangs up once it reads [DONE])

    def stream(self, upstream: FakeUpstream, pieces: tuple[str, ...] = PIECES, *, done: bool = True) -> Behaviour:
        """`done=False`: after the gate, the rest and then the end of the body, without finishing."""

        async def behaviour(request: web.Request, body: dict[str, Any]) -> web.StreamResponse:
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await response.prepare(request)
            try:
                await response.write(b"data: " + chunk(body, pieces[0]) + b"\n\n")
                self.opened.set()
                await self.release.wait()
                for piece in pieces[1:]:
                    await response.write(b"data: " + chunk(body, piece) + b"\n\n")
                if not done:
                    return response
                await response.write(b"data: " + chunk(body, "", "stop") + b"\n\n")
                self.finished = True
                await response.write(b"data: [DONE]\n\n")
            except (ConnectionResetError, asyncio.CancelledError):
                if not self.finished:
                    upstream.streams_closed_early += 1
                    upstream.closed_early.set()
                raise
            return response

        return behaviour

    def answer(self, upstream: FakeUpstream) -> Behaviour:
        """A plain answer, held at the gate: `opened` once the request arrived."""

        async def behaviour(request: web.Request, body: dict[str, Any]) -> web.StreamResponse:
            self.opened.set()
            try:
                await self.release.wait()
            except asyncio.CancelledError:
                upstream.streams_closed_early += 1
                upstream.closed_early.set()
                raise
            self.finished = True
            return web.Response(body=orjson.dumps(completion(body)), content_type="application/json")

        return behaviour


async def hang_up_after(
    gateway: TestServer,
    body: dict[str, Any],
    headers: dict[str, str],
    marker: bytes,
    *,
    hold: asyncio.Event | None = None,
    timeout_s: float = 10.0,
) -> bytes:
    """POST `body` on a raw socket, read until `marker` has arrived, then close the connection at
    once (as a client that got what it wanted does), or once `hold` is set. Returns what was read."""
    port = gateway.port
    assert port is not None
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    payload = orjson.dumps(body)
    head = [
        "POST /v1/completions HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        "Content-Type: application/json",
        f"Content-Length: {len(payload)}",
        *(f"{name}: {value}" for name, value in headers.items()),
    ]
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + payload)
    await writer.drain()
    received = b""
    try:
        async with asyncio.timeout(timeout_s):
            while marker not in received:
                data = await reader.read(65536)
                assert data, f"the connection ended before {marker!r}: {received!r}"
                received += data
            if hold is not None:
                await hold.wait()
    finally:
        writer.close()
    return received
