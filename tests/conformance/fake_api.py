"""What every loopback fake of a provider API shares: a deterministic 'model', request recording,
and scripted behaviours (fail with a status, stall, stream slowly, cut a stream short).

Each API's fake (one module each) supplies that API's routes, its request checks (it refuses what
the real API refuses), its answer, stream events and error shapes.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson
from aiohttp import web
from multidict import CIMultiDict

PROVIDER_KEY = "sk-conformance-provider-key-0123456789"


@dataclass(frozen=True)
class Generation:
    pieces: list[str]  # one 'token' each
    finish: Literal["stop", "length"]
    prompt_tokens: int
    stopped_by: str | None = None  # the stop sequence that ended it

    @property
    def text(self) -> str:
        return "".join(self.pieces)


def generate(
    prompt: str, sample: int = 0, max_tokens: int | None = 16, stop: list[str] | None = None, *, answer: str = ""
) -> Generation:
    """The fake model: `answer <sample> to <prompt>` (or the given `answer`), a word per token, cut
    by max_tokens or stop."""
    words = (answer or f"answer {sample} to {prompt}").split(" ")
    pieces = [words[0], *(" " + word for word in words[1:])]
    out: list[str] = []
    text = ""
    for piece in pieces:
        if max_tokens is not None and len(out) >= max_tokens:
            return Generation(out, "length", len(prompt.split()))
        candidate = text + piece
        hits = sorted((candidate.index(s), s) for s in stop or [] if s in candidate)
        if hits:
            at, sequence = hits[0]
            last = candidate[:at][len(text) :]
            return Generation([*out, last] if last else out, "stop", len(prompt.split()), sequence)
        out.append(piece)
        text = candidate
    return Generation(out, "stop", len(prompt.split()))


def tool_arguments(prompt: str) -> dict[str, str]:
    """The arguments the fake model calls a tool with."""
    return {"query": prompt}


def message_text(message: dict[str, Any]) -> str:
    """A chat message's text: its string content, or its text parts joined."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "".join(str(part.get("text", "")) for part in content or [] if part.get("type") == "text")


@dataclass(frozen=True)
class Fail:
    status: int
    message: str = "scripted failure"
    retry_after: str | None = None


@dataclass(frozen=True)
class Stall:
    seconds: float


@dataclass(frozen=True)
class SlowStream:
    delay_s: float  # before each text event after the first


@dataclass(frozen=True)
class CutStream:
    """Send the text events, then end the response without the API's end-of-stream events."""


@dataclass(frozen=True)
class Verbatim:
    """Answer with this JSON body, or these SSE bytes, whatever the request (status 200)."""

    json: dict[str, Any] | None = None
    sse: bytes | None = None


Mode = Fail | Stall | SlowStream | CutStream | Verbatim


@dataclass
class Seen:
    path: str
    query: dict[str, str]
    headers: CIMultiDict[str]
    body: dict[str, Any]


class Refused(Exception):
    """A request the real API would refuse: the fake answers with the API's error shape."""

    def __init__(self, status: int, message: str, kind: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind


@dataclass
class FakeAPI:
    received: list[Seen] = field(default_factory=list)
    queued: deque[Mode] = field(default_factory=deque)
    streams_closed_early: int = 0  # streams the gateway hung up on before they were finished
    closed_early: asyncio.Event = field(default_factory=asyncio.Event)
    closings: asyncio.Queue[None] = field(default_factory=asyncio.Queue)  # one per call hung up on early
    base_url: str = ""  # set once the server listens
    api_key: str = PROVIDER_KEY
    # What the API answers a wrong key with (each API has its own).
    bad_key_status: int = 401

    def app(self) -> web.Application:
        app = web.Application()
        self.add_routes(app)
        return app

    def script(self, *modes: Mode) -> None:
        self.queued.extend(modes)

    def generate(
        self, prompt: str, sample: int = 0, max_tokens: int | None = 16, stop: list[str] | None = None
    ) -> Generation:
        return generate(prompt, sample, max_tokens, stop)

    # Each API's fake provides these.
    def add_routes(self, app: web.Application) -> None:
        raise NotImplementedError

    def check(self, request: web.Request, body: dict[str, Any]) -> None:
        """Raise `Refused` for what the real API refuses."""
        raise NotImplementedError

    def is_stream(self, request: web.Request, body: dict[str, Any]) -> bool:
        raise NotImplementedError

    def answer(self, request: web.Request, body: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def stream_events(self, request: web.Request, body: dict[str, Any]) -> tuple[list[bytes], list[bytes]]:
        """(the SSE frames carrying text, the frames that end the stream). Anything before the first
        text goes in the first element: a slow stream pauses between elements."""
        raise NotImplementedError

    def error_body(self, status: int, message: str, kind: str | None) -> dict[str, Any]:
        raise NotImplementedError

    def holds(self, response_id: str) -> bool:
        """Whether it keeps this Responses API `response` (only an API that serves it stores any)."""
        return False

    async def handle(self, request: web.Request) -> web.StreamResponse:
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            return self._error(400, "the body is not JSON")
        self.received.append(Seen(request.path, dict(request.query), request.headers.copy(), body))
        try:
            self.check(request, body)
        except Refused as refused:
            return self._error(refused.status, refused.message, refused.kind)
        mode = self.queued.popleft() if self.queued else None
        if isinstance(mode, Fail):
            headers = {"Retry-After": mode.retry_after} if mode.retry_after else None
            return self._error(mode.status, mode.message, headers=headers)
        if isinstance(mode, Stall):
            try:
                await asyncio.sleep(mode.seconds)
            except asyncio.CancelledError:  # the gateway hung up before the answer
                self.closings.put_nowait(None)
                raise
        if isinstance(mode, Verbatim):
            return await self._verbatim(request, mode)
        if self.is_stream(request, body):
            return await self._stream(request, body, mode)
        return web.Response(body=orjson.dumps(self.answer(request, body)), content_type="application/json")

    async def _stream(self, request: web.Request, body: dict[str, Any], mode: Mode | None) -> web.StreamResponse:
        text_events, end_events = self.stream_events(request, body)
        events = text_events if isinstance(mode, CutStream) else text_events + end_events
        delay = mode.delay_s if isinstance(mode, SlowStream) else 0.0
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        try:
            for index, event in enumerate(events):
                if delay and index > 0:
                    await asyncio.sleep(delay)
                await response.write(event)
        except (ConnectionResetError, asyncio.CancelledError):
            self.streams_closed_early += 1
            self.closed_early.set()
            self.closings.put_nowait(None)
            raise
        return response

    async def _verbatim(self, request: web.Request, mode: Verbatim) -> web.StreamResponse:
        if mode.json is not None:
            return web.Response(body=orjson.dumps(mode.json), content_type="application/json")
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(mode.sse or b"")
        return response

    def _error(
        self, status: int, message: str, kind: str | None = None, headers: dict[str, str] | None = None
    ) -> web.Response:
        body = orjson.dumps(self.error_body(status, message, kind))
        return web.Response(status=status, body=body, content_type="application/json", headers=headers)


def sse(payload: dict[str, Any], event: str | None = None, newline: bytes = b"\n") -> bytes:
    """One SSE frame: an optional `event:` line, one `data:` line."""
    head = b"event: " + event.encode() + newline if event else b""
    return head + b"data: " + orjson.dumps(payload) + newline + newline


def require(condition: bool, message: str, status: int = 400, kind: str | None = None) -> None:
    if not condition:
        raise Refused(status, message, kind)
