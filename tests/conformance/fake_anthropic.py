"""A loopback fake of Anthropic's Messages API (`POST /v1/messages`), as its reference describes
it: `x-api-key` and `anthropic-version` headers required, `max_tokens` required, unknown fields
refused, temperature 0 to 1; a `message` answer, or the named stream events ending with
`message_stop`; errors as `{"type": "error", "error": {"type", "message"}}`. Content is a string or
blocks (text, image, document, tool_use, tool_result: each result answering the previous turn's
tool_use); given tools, the fake model calls one (a `tool_use` block, stop_reason `tool_use`) unless
the last turn holds tool results, which it answers in text. `/v1/messages/count_tokens` counts as
its answers' input usage does."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from tests.conformance.fake_api import FakeAPI, Generation, Seen, require, sse, tool_arguments

BLOCK_TYPES = {"user": {"text", "image", "document", "tool_result"}, "assistant": {"text", "tool_use"}}

FIELDS = frozenset(
    {
        "model", "messages", "max_tokens", "system", "stop_sequences", "temperature", "top_p", "top_k", "metadata",
        "stream", "tools", "tool_choice", "thinking", "service_tier", "container", "mcp_servers",
    }
)  # fmt: skip
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


@dataclass
class AnthropicFake(FakeAPI):
    draws: Counter[str] = field(default_factory=Counter)

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/messages", self.handle)
        app.router.add_post("/v1/messages/count_tokens", self.count_tokens)

    async def count_tokens(self, request: web.Request) -> web.Response:
        """`{"input_tokens"}`: what a message for this body would report as its input usage."""
        body = orjson.loads(await request.read())
        self.received.append(Seen(request.path, dict(request.query), request.headers.copy(), body))
        if request.headers.get("x-api-key") != self.api_key:
            return web.json_response(self.error_body(401, "invalid x-api-key", None), status=401)
        prompt = self.generate(_prompt(body["messages"][-1]["content"]))
        return web.json_response({"input_tokens": prompt.prompt_tokens})

    def check(self, request: web.Request, body: dict[str, Any]) -> None:
        require(request.headers.get("x-api-key") == self.api_key, "invalid x-api-key", 401)
        require("anthropic-version" in request.headers, "anthropic-version: header is required")
        for name in sorted(set(body) - FIELDS):
            require(False, f"{name}: Extra inputs are not permitted")
        require(isinstance(body.get("model"), str), "model: Field required")
        require(isinstance(body.get("max_tokens"), int), "max_tokens: Field required")
        require(body["max_tokens"] >= 1, "max_tokens: Input should be greater than or equal to 1")
        messages = body.get("messages")
        require(isinstance(messages, list) and bool(messages), "messages: Field required")
        used: set[str] = set()  # the tool_use ids of the previous turn
        for i, message in enumerate(messages or []):
            role = message.get("role")
            require(role in ("user", "assistant"), "messages: Unexpected role")
            content = message.get("content")
            if isinstance(content, str):
                require(bool(content), "messages: text content blocks must be non-empty")
                used = set()
                continue
            require(isinstance(content, list) and bool(content), f"messages.{i}.content: Input should be a list")
            for block in content:
                require(block.get("type") in BLOCK_TYPES[role], f"messages.{i}: unexpected block {block.get('type')}")
                require(block.get("type") != "text" or bool(block.get("text")), "text content blocks must be non-empty")
                if block.get("type") == "tool_result":
                    require(block.get("tool_use_id") in used, f"messages.{i}: tool_result without a tool_use")
            used = {block["id"] for block in content if block.get("type") == "tool_use"}
        for tool in body.get("tools", []):
            require(set(tool) <= {"name", "description", "input_schema"}, "tools: Extra inputs are not permitted")
            require(isinstance(tool.get("input_schema"), dict), "tools.input_schema: Field required")
        choice = body.get("tool_choice", {"type": "auto"})
        require(choice.get("type") in ("auto", "any", "tool", "none"), "tool_choice: Input tag does not match")
        require("tools" in body or "tool_choice" not in body, "tool_choice may only be given with tools")
        require(0 <= body.get("temperature", 0) <= 1, "temperature: Input should be less than or equal to 1")
        require(set(body.get("metadata", {})) <= {"user_id"}, "metadata: Extra inputs are not permitted")

    def is_stream(self, request: web.Request, body: dict[str, Any]) -> bool:
        return bool(body.get("stream"))

    def generation(self, body: dict[str, Any]) -> Generation:
        """One message per call: each call for the same prompt draws the next sample, as sampling would."""
        prompt = _prompt(body["messages"][-1]["content"])
        sample = self.draws[prompt]
        self.draws[prompt] += 1
        return self.generate(prompt, sample, body["max_tokens"], body.get("stop_sequences"))

    def answer(self, request: web.Request, body: dict[str, Any]) -> dict[str, Any]:
        g = self.generation(body)
        usage = {"input_tokens": g.prompt_tokens, "output_tokens": len(g.pieces)}
        tool = _tool(body)
        if tool is not None:
            use = {"type": "tool_use", "id": "toolu_fake0", "name": tool, "input": tool_arguments(_last_text(body))}
            stop = {"stop_reason": "tool_use", "stop_sequence": None}
            return {**_message(body), "content": [use], **stop, "usage": usage}
        return {**_message(body), "content": [{"type": "text", "text": g.text}], **_stop(g), "usage": usage}

    def stream_events(self, request: web.Request, body: dict[str, Any]) -> tuple[list[bytes], list[bytes]]:
        if _tool(body) is not None:
            return self._tool_events(body)
        g = self.generation(body)
        start = {
            **_message(body),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": g.prompt_tokens, "output_tokens": 1},
        }
        block = {"type": "text", "text": ""}
        preamble = (
            _event("message_start", message=start)
            + _event("content_block_start", index=0, content_block=block)
            + _event("ping")
        )
        deltas = [_event("content_block_delta", index=0, delta={"type": "text_delta", "text": p}) for p in g.pieces]
        text = [preamble + deltas[0], *deltas[1:]] if deltas else [preamble]
        end = [
            _event("content_block_stop", index=0),
            _event("message_delta", delta=_stop(g), usage={"output_tokens": len(g.pieces)}),
            _event("message_stop"),
        ]
        return text, end

    def _tool_events(self, body: dict[str, Any]) -> tuple[list[bytes], list[bytes]]:
        """A tool_use block whose input arrives as input_json_delta pieces (Anthropic's streaming)."""
        start = {**_message(body), "content": [], "stop_reason": None, "stop_sequence": None,
                 "usage": {"input_tokens": 1, "output_tokens": 1}}  # fmt: skip
        block: dict[str, Any] = {"type": "tool_use", "id": "toolu_fake0", "name": _tool(body), "input": {}}
        arguments = orjson.dumps(tool_arguments(_last_text(body))).decode()
        pieces = ["", arguments[: len(arguments) // 2], arguments[len(arguments) // 2 :]]
        text = [
            _event("message_start", message=start) + _event("content_block_start", index=0, content_block=block),
            *(_event("content_block_delta", index=0, delta={"type": "input_json_delta", "partial_json": piece})
              for piece in pieces),
        ]  # fmt: skip
        end = [
            _event("content_block_stop", index=0),
            _event("message_delta", delta={"stop_reason": "tool_use"}, usage={"output_tokens": 5}),
            _event("message_stop"),
        ]
        return text, end

    def error_body(self, status: int, message: str, kind: str | None) -> dict[str, Any]:
        return {"type": "error", "error": {"type": kind or ERROR_TYPES.get(status, "api_error"), "message": message}}


def _prompt(content: Any) -> str:
    """What the fake model answers: the text of the last turn, or of the tool results in it."""
    if isinstance(content, str):
        return content
    texts = [str(block.get("text", "")) for block in content if block.get("type") == "text"]
    results = [str(block.get("content", "")) for block in content if block.get("type") == "tool_result"]
    return "".join(results or texts)


def _last_text(body: dict[str, Any]) -> str:
    return _prompt(body["messages"][-1]["content"])


def _tool(body: dict[str, Any]) -> str | None:
    """The tool the fake model calls: given tools, unless the last turn holds tool results."""
    content = body["messages"][-1]["content"]
    answered = isinstance(content, list) and any(block.get("type") == "tool_result" for block in content)
    choice = body.get("tool_choice", {})
    if not body.get("tools") or answered or choice.get("type") == "none":
        return None
    return str(choice["name"]) if choice.get("type") == "tool" else str(body["tools"][0]["name"])


def _event(kind: str, **fields: Any) -> bytes:
    """A stream event: its type as the SSE event name and in the data, as Anthropic sends them."""
    return sse({"type": kind, **fields}, kind)


def _message(body: dict[str, Any]) -> dict[str, Any]:
    return {"id": "msg_fake", "type": "message", "role": "assistant", "model": body["model"]}


def _stop(g: Generation) -> dict[str, Any]:
    if g.finish == "length":
        return {"stop_reason": "max_tokens", "stop_sequence": None}
    if g.stopped_by is not None:
        return {"stop_reason": "stop_sequence", "stop_sequence": g.stopped_by}
    return {"stop_reason": "end_turn", "stop_sequence": None}
