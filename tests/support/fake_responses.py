"""OpenAI's Responses API as the loopback fakes serve it (`ResponsesAPI`: the one fake of it, whatever
the model behind), and `FakeResponses`, an upstream serving it for the native pass-through tests.

`ResponsesAPI` does with a body what OpenAI does: it refuses what OpenAI refuses (a
previous_response_id it does not hold, `max_output_tokens` under 16, a `function_call_output` whose
call is not in the conversation) with OpenAI's 400; it answers with a `response` as OpenAI writes it
(`json.dumps` spacing, so a relay byte for byte is told from a re-encoding): the output items the
model's `Turn` makes (a message with its output_text, or a function_call; `incomplete`, reason
`max_output_tokens`, when the model was cut short); it keeps it, with the conversation it ended,
unless `store: false`, so a later previous_response_id continues it; streamed, OpenAI's semantic
events with `event:` lines and `sequence_number`s, the text in `pieces` (by default word by word).
The model (`turn`) is each fake's own: the conformance suite's generates its deterministic text
(`tests.conformance.fake_openai`).

`FakeResponses` records the bytes of each request (`POST /v1/responses`, Azure's `/openai/v1/responses`,
`DELETE …/{id}`) and serves a chat API beside (a `FakeUpstream`'s, so the same upstream serves a
bridged call too). Its message says `text` (by default "echo: " and the input's last text), after a
web search when the body offers the `web_search` tool; scripted, it fails with a status (`statuses`)
or a stream with an `error` event (`error_after`).
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
MIN_OUTPUT_TOKENS = 16  # OpenAI refuses a smaller max_output_tokens
Json = dict[str, Any]


@dataclass
class Seen:
    method: str
    path: str
    headers: CIMultiDict[str]
    raw: bytes

    @property
    def body(self) -> Any:
        return json.loads(self.raw)


@dataclass(frozen=True)
class Turn:
    """What the model answers a conversation: text (cut short by max_output_tokens when
    `incomplete`), or a call of a function tool; after the items in `before` (a built-in tool's call)."""

    text: str = ""
    call: tuple[str, str] | None = None  # the function's name, its arguments (JSON)
    incomplete: bool = False
    before: tuple[Json, ...] = ()
    usage: Json = field(default_factory=lambda: USAGE)


def frame(event: Json) -> bytes:
    return b"event: " + str(event["type"]).encode() + b"\ndata: " + json.dumps(event).encode() + b"\n\n"


def input_items(source: Any) -> list[Json]:
    """A body's `input` as items: a string is the user's message; a message may leave out its type."""
    if isinstance(source, str):
        return [{"type": "message", "role": "user", "content": source}]
    return [item if "type" in item else {"type": "message", **item} for item in source or () if isinstance(item, dict)]


def item_text(item: Json) -> str:
    """A message's text (its string content, or its text parts joined); a tool result's output."""
    content = item.get("output") if item.get("type") == "function_call_output" else item.get("content")
    if isinstance(content, str):
        return content
    return "".join(str(part.get("text", "")) for part in content or () if isinstance(part, dict))


def last_text(body: Json) -> str:
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


def invalid(message: str, param: str | None, code: str | None) -> Json:
    """OpenAI's error for a body it refuses (status 400)."""
    return {"message": message, "type": "invalid_request_error", "param": param, "code": code}


@dataclass
class ResponsesAPI:
    """OpenAI's Responses API, whatever the model (`turn`, each fake's own)."""

    stored: dict[str, Json] = field(default_factory=dict)  # what it answered with `store` (not `false`)
    conversations: dict[str, list[Json]] = field(default_factory=dict)  # each stored one's, its output last
    pieces: list[str] | None = None  # how a stream splits a message's text; None: word by word

    def turn(self, body: Json, conversation: list[Json]) -> Turn:
        raise NotImplementedError

    def conversation(self, body: Json) -> list[Json]:
        """The items the model reads: the chain's behind previous_response_id (held here), then the input."""
        return [*self.conversations.get(body.get("previous_response_id") or "", ()), *input_items(body.get("input"))]

    def refusal(self, body: Json) -> Json | None:
        """OpenAI's error for what it refuses of `body`; None when it answers it."""
        previous = body.get("previous_response_id")
        if previous is not None and previous not in self.stored:
            message = f"Previous response with id '{previous}' not found."
            return invalid(message, "previous_response_id", "previous_response_not_found")
        limit = body.get("max_output_tokens")
        if isinstance(limit, int) and limit < MIN_OUTPUT_TOKENS:
            message = (
                "Invalid 'max_output_tokens': integer below minimum value. "
                f"Expected a value >= {MIN_OUTPUT_TOKENS}, but got {limit} instead."
            )
            return invalid(message, "max_output_tokens", "integer_below_min_value")
        conversation = self.conversation(body)
        calls = {item.get("call_id") for item in conversation if item.get("type") == "function_call"}
        for item in conversation:
            if item.get("type") == "function_call_output" and item.get("call_id") not in calls:
                message = f"No tool call found for function call output with call_id {item.get('call_id')}."
                return invalid(message, "input", None)
        return None

    def respond(self, body: Json) -> Json:
        """The `response` to `body` (one `refusal` let through), kept unless `store: false`."""
        conversation = self.conversation(body)
        turn = self.turn(body, conversation)
        tag = secrets.token_hex(8)
        output = list(turn.before)
        if turn.call is not None:
            name, arguments = turn.call
            call = {"type": "function_call", "id": f"fc_{tag}", "call_id": f"call_{tag}", "name": name}
            output.append({**call, "arguments": arguments, "status": "completed"})
        else:
            part = {"type": "output_text", "text": turn.text, "annotations": [], "logprobs": []}
            status = "incomplete" if turn.incomplete else "completed"
            output.append(
                {"type": "message", "id": f"msg_{tag}", "status": status, "role": "assistant", "content": [part]}
            )
        response = {
            "id": f"resp_{tag}",
            "object": "response",
            "created_at": 1760000000,
            "status": "incomplete" if turn.incomplete else "completed",
            "background": False,
            "error": None,
            "incomplete_details": {"reason": "max_output_tokens"} if turn.incomplete else None,
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
            "usage": turn.usage,
            "user": None,
            "metadata": body.get("metadata") or {},
        }
        if body.get("store") is not False:
            self.stored[response["id"]] = response
            self.conversations[response["id"]] = [*conversation, *output]
        return response

    def delete(self, response_id: str) -> bool:
        """Forget a stored response: whether it held one."""
        self.conversations.pop(response_id, None)
        return self.stored.pop(response_id, None) is not None

    def events(self, response: Json) -> list[Json]:
        """OpenAI's events for `response`, numbered."""
        start = {**response, "status": "in_progress", "output": [], "usage": None, "incomplete_details": None}
        events: list[Json] = [
            {"type": "response.created", "response": start},
            {"type": "response.in_progress", "response": start},
        ]
        for index, item in enumerate(response["output"]):
            if item["type"] == "message":
                events += self._message_events(index, item)
            elif item["type"] == "function_call":
                where = {"item_id": item["id"], "output_index": index}
                arguments = item["arguments"]
                opened = {**item, "status": "in_progress", "arguments": ""}
                events.append({"type": "response.output_item.added", "output_index": index, "item": opened})
                for piece in (arguments[: len(arguments) // 2], arguments[len(arguments) // 2 :]):
                    events.append({"type": "response.function_call_arguments.delta", **where, "delta": piece})
                done = {"type": "response.function_call_arguments.done", **where, "name": item["name"]}
                events.append({**done, "arguments": arguments})
                events.append({"type": "response.output_item.done", "output_index": index, "item": item})
            else:
                events.append({"type": "response.output_item.added", "output_index": index, "item": item})
                events.append({"type": "response.output_item.done", "output_index": index, "item": item})
        closing = "response.incomplete" if response["status"] == "incomplete" else "response.completed"
        events.append({"type": closing, "response": response})
        return [{"type": event["type"], "sequence_number": n, **event} for n, event in enumerate(events)]

    def _message_events(self, index: int, item: Json) -> list[Json]:
        text = item["content"][0]["text"]
        opened = {**item, "status": "in_progress", "content": []}
        empty = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        where = {"item_id": item["id"], "output_index": index, "content_index": 0}
        pieces = self.pieces
        if pieces is None:
            pieces = [word if n == 0 else " " + word for n, word in enumerate(text.split(" "))]
        return [
            {"type": "response.output_item.added", "output_index": index, "item": opened},
            {"type": "response.content_part.added", **where, "part": empty},
            *({"type": "response.output_text.delta", **where, "delta": piece, "logprobs": []} for piece in pieces),
            {"type": "response.output_text.done", **where, "text": text, "logprobs": []},
            {"type": "response.content_part.done", **where, "part": item["content"][0]},
            {"type": "response.output_item.done", "output_index": index, "item": item},
        ]


@dataclass
class FakeResponses(ResponsesAPI):
    seen: list[Seen] = field(default_factory=list)
    chat: FakeUpstream = field(default_factory=FakeUpstream)
    text: str | None = None  # what the next answers say; None: "echo: " and the input's last text
    statuses: deque[tuple[int, Json]] = field(default_factory=deque)  # scripted failures
    error_after: int | None = None  # a stream's `error` event after this many events (then it ends)
    gate: asyncio.Event = field(default_factory=asyncio.Event)  # the `error` event waits for it
    base_url: str = ""  # set once it listens: `{base_url}/responses`

    def app(self) -> web.Application:
        app = web.Application()
        for prefix in ("/v1", "/openai/v1"):  # OpenAI's, Azure OpenAI's v1 API
            app.router.add_post(f"{prefix}/responses", self.create)
            app.router.add_delete(f"{prefix}/responses/{{response_id}}", self.remove)
        chat = self.chat.app()
        for resource in chat.router.resources():
            for route in resource:
                app.router.add_route(route.method, resource.canonical, route.handler)
        return app

    @property
    def responses(self) -> list[Seen]:
        return [seen for seen in self.seen if seen.method == "POST"]

    def turn(self, body: Json, conversation: list[Json]) -> Turn:
        before: tuple[Json, ...] = ()
        if any(isinstance(tool, dict) and tool.get("type") == "web_search" for tool in body.get("tools") or []):
            action = {"type": "search", "query": last_text(body)}
            before = (
                {
                    "type": "web_search_call",
                    "id": f"ws_{secrets.token_hex(8)}",
                    "status": "completed",
                    "action": action,
                },
            )
        return Turn(self.text if self.text is not None else f"echo: {last_text(body)}", before=before)

    async def create(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        self.seen.append(Seen("POST", request.path, CIMultiDict(request.headers), raw))
        if self.statuses:
            status, error = self.statuses.popleft()
            return web.json_response({"error": error}, status=status)
        body = json.loads(raw)
        refused = self.refusal(body)
        if refused is not None:
            return web.json_response({"error": refused}, status=400)
        response = self.respond(body)
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

    async def remove(self, request: web.Request) -> web.Response:
        self.seen.append(Seen("DELETE", request.path, CIMultiDict(request.headers), b""))
        response_id = request.match_info["response_id"]
        if not self.delete(response_id):
            return web.json_response({"error": {"message": "not found", "type": "invalid_request_error"}}, status=404)
        return web.json_response({"id": response_id, "object": "response", "deleted": True})
