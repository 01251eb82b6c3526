"""A loopback fake of OpenAI's Responses API (`POST /v1/responses`, `DELETE /v1/responses/{id}`) for
the native pass-through tests and benchmark, beside its chat API (a `FakeUpstream`'s, so the same
upstream serves a bridged call too). It records the bytes of each request and answers as OpenAI
writes it (`json.dumps` spacing, so a relay byte for byte is told from a re-encoding): a `response`
whose message says `text` (by default "echo: " and the input's last text), after a web search when
the body offers the `web_search` tool; streamed, OpenAI's semantic events, `event:` lines and
`sequence_number`s, the text in `pieces`. It keeps what it answered with `store` (not `false`), and
refuses a `previous_response_id` it does not hold with OpenAI's 400; scripted, it fails with a status
(`statuses`) or a stream with an `error` event (`error_after`).
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from multidict import CIMultiDict

from tests.support.fake_upstream import FakeUpstream

USAGE = {
    "input_tokens": 31,
    "input_tokens_details": {"cached_tokens": 8},
    "output_tokens": 7,
    "output_tokens_details": {"reasoning_tokens": 2},
    "total_tokens": 38,
}


@dataclass
class Seen:
    method: str
    path: str
    headers: CIMultiDict[str]
    raw: bytes

    @property
    def body(self) -> Any:
        return json.loads(self.raw)


def frame(event: dict[str, Any]) -> bytes:
    return b"event: " + str(event["type"]).encode() + b"\ndata: " + json.dumps(event).encode() + b"\n\n"


def last_text(body: dict[str, Any]) -> str:
    source = body.get("input")
    if isinstance(source, str):
        return source
    for item in reversed(source or []):
        content = item.get("content") if isinstance(item, dict) else None
        if isinstance(content, str):
            return content
        for part in reversed(content or []):
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                return str(part["text"])
    return ""


@dataclass
class FakeResponses:
    seen: list[Seen] = field(default_factory=list)
    chat: FakeUpstream = field(default_factory=FakeUpstream)
    text: str | None = None  # what the next answers say; None: "echo: " and the input's last text
    pieces: list[str] | None = None  # how a stream splits the text; None: word by word
    statuses: deque[tuple[int, dict[str, Any]]] = field(default_factory=deque)  # scripted failures
    error_after: int | None = None  # a stream's `error` event after this many events (then it ends)
    gate: asyncio.Event = field(default_factory=asyncio.Event)  # the `error` event waits for it
    stored: dict[str, dict[str, Any]] = field(default_factory=dict)
    base_url: str = ""  # set once it listens: `{base_url}/responses`

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/responses", self.create)
        app.router.add_post("/openai/v1/responses", self.create)  # Azure OpenAI's v1 API
        app.router.add_delete("/v1/responses/{response_id}", self.delete)
        chat = self.chat.app()
        for resource in chat.router.resources():
            for route in resource:
                app.router.add_route(route.method, resource.canonical, route.handler)
        return app

    @property
    def responses(self) -> list[Seen]:
        return [seen for seen in self.seen if seen.method == "POST"]

    async def create(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        self.seen.append(Seen("POST", request.path, CIMultiDict(request.headers), raw))
        if self.statuses:
            status, error = self.statuses.popleft()
            return web.json_response({"error": error}, status=status)
        body = json.loads(raw)
        previous = body.get("previous_response_id")
        if previous is not None and previous not in self.stored:
            error = {
                "message": f"Previous response with id '{previous}' not found.",
                "type": "invalid_request_error",
                "param": "previous_response_id",
                "code": "previous_response_not_found",
            }
            return web.json_response({"error": error}, status=400)
        response = self.response(body)
        if body.get("store") is not False:
            self.stored[response["id"]] = response
        if not body.get("stream"):
            return web.Response(body=json.dumps(response), content_type="application/json")
        stream = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await stream.prepare(request)
        for number, event in enumerate(self.events(response)):
            if number == self.error_after:
                await self.gate.wait()  # the events before it have reached the client
                failure = {"type": "error", "sequence_number": number, "code": "server_error", "param": None}
                await stream.write(frame({**failure, "message": "The model failed mid-answer."}))
                break
            await stream.write(frame(event))
        await stream.write_eof()
        return stream

    async def delete(self, request: web.Request) -> web.Response:
        self.seen.append(Seen("DELETE", request.path, CIMultiDict(request.headers), b""))
        response_id = request.match_info["response_id"]
        if self.stored.pop(response_id, None) is None:
            return web.json_response({"error": {"message": "not found", "type": "invalid_request_error"}}, status=404)
        return web.json_response({"id": response_id, "object": "response", "deleted": True})

    def response(self, body: dict[str, Any]) -> dict[str, Any]:
        tag = secrets.token_hex(8)
        output: list[dict[str, Any]] = []
        if any(isinstance(tool, dict) and tool.get("type") == "web_search" for tool in body.get("tools") or []):
            action = {"type": "search", "query": last_text(body)}
            output.append({"type": "web_search_call", "id": f"ws_{tag}", "status": "completed", "action": action})
        text = self.text if self.text is not None else f"echo: {last_text(body)}"
        part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
        output.append(
            {"type": "message", "id": f"msg_{tag}", "status": "completed", "role": "assistant", "content": [part]}
        )
        return {
            "id": f"resp_{tag}",
            "object": "response",
            "created_at": 1760000000,
            "status": "completed",
            "background": False,
            "error": None,
            "incomplete_details": None,
            "instructions": body.get("instructions"),
            "max_output_tokens": body.get("max_output_tokens"),
            "model": f"{body['model']}-2025-08-07",
            "output": output,
            "parallel_tool_calls": True,
            "previous_response_id": body.get("previous_response_id"),
            "reasoning": {"effort": None, "summary": None},
            "store": body.get("store") is not False,
            "temperature": 1.0,
            "text": {"format": {"type": "text"}, "verbosity": "medium"},
            "tool_choice": body.get("tool_choice", "auto"),
            "tools": body.get("tools") or [],
            "top_p": 1.0,
            "truncation": "disabled",
            "usage": USAGE,
            "user": None,
            "metadata": body.get("metadata") or {},
        }

    def events(self, response: dict[str, Any]) -> list[dict[str, Any]]:
        """OpenAI's events for `response`, numbered."""
        start = {**response, "status": "in_progress", "output": [], "usage": None}
        events: list[dict[str, Any]] = [
            {"type": "response.created", "response": start},
            {"type": "response.in_progress", "response": start},
        ]
        for index, item in enumerate(response["output"]):
            if item["type"] != "message":
                events.append({"type": "response.output_item.added", "output_index": index, "item": item})
                events.append({"type": "response.output_item.done", "output_index": index, "item": item})
                continue
            text = item["content"][0]["text"]
            opened = {**item, "status": "in_progress", "content": []}
            empty = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            where = {"item_id": item["id"], "output_index": index, "content_index": 0}
            events.append({"type": "response.output_item.added", "output_index": index, "item": opened})
            events.append({"type": "response.content_part.added", **where, "part": empty})
            pieces = self.pieces if self.pieces is not None else [word for word in text.split(" ")]
            if self.pieces is None:
                pieces = [piece if n == 0 else " " + piece for n, piece in enumerate(pieces)]
            for piece in pieces:
                events.append({"type": "response.output_text.delta", **where, "delta": piece, "logprobs": []})
            events.append({"type": "response.output_text.done", **where, "text": text, "logprobs": []})
            events.append({"type": "response.content_part.done", **where, "part": item["content"][0]})
            events.append({"type": "response.output_item.done", "output_index": index, "item": item})
        events.append({"type": "response.completed", "response": response})
        return [{"type": event["type"], "sequence_number": n, **event} for n, event in enumerate(events)]
