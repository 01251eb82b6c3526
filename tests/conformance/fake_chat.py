"""A loopback fake of OpenAI's Chat Completions API (`POST /v1/chat/completions`, Bearer key), as
the reference describes it: messages in, `chat.completion` (or `chat.completion.chunk` events
ending with `[DONE]`) out, unknown parameters refused."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from tests.conformance.fake_api import FakeAPI, Generation, message_text, require, sse, tool_arguments

PARAMETERS = frozenset(
    {
        "model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "n", "stop", "seed",
        "presence_penalty", "frequency_penalty", "logit_bias", "user", "logprobs", "top_logprobs", "stream",
        "stream_options", "response_format", "tools", "tool_choice", "parallel_tool_calls", "service_tier",
        "store", "metadata", "reasoning_effort", "modalities", "prediction", "audio",
    }
)  # fmt: skip


@dataclass
class ChatCompletionsFake(FakeAPI):
    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/chat/completions", self.handle)

    def check(self, request: web.Request, body: dict[str, Any]) -> None:
        given = request.headers.get("Authorization", "")
        require(given == f"Bearer {self.api_key}", f"Incorrect API key provided: {given[7:]}.", 401, "invalid_api_key")
        check_chat_body(body, self.extra_parameters())

    def extra_parameters(self) -> frozenset[str]:
        """What an OpenAI-compatible server accepts beyond OpenAI's list (vLLM takes `top_k`)."""
        return frozenset({"top_k"})

    def is_stream(self, request: web.Request, body: dict[str, Any]) -> bool:
        return bool(body.get("stream"))

    def answer(self, request: web.Request, body: dict[str, Any]) -> dict[str, Any]:
        return chat_answer(self, body)

    def stream_events(self, request: web.Request, body: dict[str, Any]) -> tuple[list[bytes], list[bytes]]:
        return chat_stream_events(self, body)

    def error_body(self, status: int, message: str, kind: str | None) -> dict[str, Any]:
        return {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": kind}}


def check_chat_body(body: dict[str, Any], extra: frozenset[str] = frozenset(), *, needs_model: bool = True) -> None:
    """What OpenAI refuses of a chat body (also the check of the OpenAI and Azure fakes' chat routes;
    Azure names the model in the path)."""
    unknown = sorted(set(body) - PARAMETERS - extra)
    require(not unknown, f"Unrecognized request argument supplied: {', '.join(unknown)}")
    require(isinstance(body.get("model"), str) or not needs_model, "you must provide a model parameter")
    messages = body.get("messages")
    require(isinstance(messages, list) and bool(messages), "'messages' must be a non-empty array")
    called: set[str] = set()
    for message in messages or []:
        role = message.get("role")
        require(role in ("system", "developer", "user", "assistant", "tool"), "invalid role")
        content = message.get("content")
        calls = message.get("tool_calls") or []
        require(role != "assistant" or not calls or all(call.get("type") == "function" for call in calls), "bad call")
        called.update(str(call.get("id")) for call in calls)
        require(isinstance(content, str | list) or (role == "assistant" and bool(calls)), "'content' is required")
        require(role != "tool" or message.get("tool_call_id") in called, "a tool message must answer a tool call")
    require((messages or [{}])[-1].get("role") in ("user", "tool"), "the last message must be the user's or a tool's")
    require("top_logprobs" not in body or body.get("logprobs") is True, "'top_logprobs' needs 'logprobs': true")
    require("stream_options" not in body or bool(body.get("stream")), "'stream_options' needs 'stream': true")
    require(not ("max_tokens" in body and "max_completion_tokens" in body), "give one of the max tokens fields")


def chat_generations(fake: FakeAPI, body: dict[str, Any]) -> list[Generation]:
    limit = body.get("max_completion_tokens", body.get("max_tokens"))
    stop = body.get("stop")
    stops = [stop] if isinstance(stop, str) else stop
    prompt = message_text(body["messages"][-1])
    return [fake.generate(prompt, j, limit, stops) for j in range(body.get("n") or 1)]


def wants_tool(body: dict[str, Any], last_role: str) -> str | None:
    """The fake model calls a tool (the named one, else the first) when it is given tools and the
    last message is the user's; after a tool's result, it answers in text."""
    tools, choice = body.get("tools") or [], body.get("tool_choice")
    if not tools or choice == "none" or last_role != "user":
        return None
    if isinstance(choice, dict):
        return str(choice["function"]["name"])
    return str(tools[0]["function"]["name"])


def chat_answer(fake: FakeAPI, body: dict[str, Any]) -> dict[str, Any]:
    generations = chat_generations(fake, body)
    tool = wants_tool(body, body["messages"][-1]["role"])
    choices = []
    for j, g in enumerate(generations):
        message: dict[str, Any] = {"role": "assistant", "content": g.text, "refusal": None}
        if tool is not None:
            arguments = orjson.dumps(tool_arguments(message_text(body["messages"][-1]))).decode()
            call = {"id": f"call_fake{j}", "type": "function", "function": {"name": tool, "arguments": arguments}}
            message.update(content=None, tool_calls=[call])
        finish = "tool_calls" if tool is not None else g.finish
        choices.append({"index": j, "message": message, "logprobs": _logprobs(g.pieces, body), "finish_reason": finish})
    usage = _usage(generations, body)
    return {**_head(body, "chat.completion"), "choices": choices, "usage": usage}


def chat_stream_events(fake: FakeAPI, body: dict[str, Any]) -> tuple[list[bytes], list[bytes]]:
    generations = chat_generations(fake, body)
    tool = wants_tool(body, body["messages"][-1]["role"])
    head = _head(body, "chat.completion.chunk")
    if (body.get("stream_options") or {}).get("include_usage"):
        head["usage"] = None

    def frame(j: int, delta: dict[str, Any], finish: str | None = None, logprobs: Any = None) -> bytes:
        return sse({**head, "choices": [{"index": j, "delta": delta, "logprobs": logprobs, "finish_reason": finish}]})

    roles = b"".join(frame(j, {"role": "assistant", "content": ""}) for j in range(len(generations)))
    if tool is not None:
        arguments = orjson.dumps(tool_arguments(message_text(body["messages"][-1]))).decode()
        pieces = [arguments[: len(arguments) // 2], arguments[len(arguments) // 2 :]]
        named = {"index": 0, "id": "call_fake0", "type": "function", "function": {"name": tool, "arguments": ""}}
        text = [roles + frame(0, {"tool_calls": [named]})]
        text += [frame(0, {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}) for piece in pieces]
        end = [frame(0, {}, "tool_calls")]
    else:
        text = [
            frame(j, {"content": piece}, logprobs=_logprobs([piece], body))
            for j, g in enumerate(generations)
            for piece in g.pieces
        ]
        text = [roles + text[0], *text[1:]] if text else [roles]
        end = [frame(j, {}, g.finish) for j, g in enumerate(generations)]
    if "usage" in head:
        end.append(sse({**head, "choices": [], "usage": _usage(generations, body)}))
    return text, [*end, b"data: [DONE]\n\n"]


def _head(body: dict[str, Any], obj: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": obj,
        "created": int(time.time()),
        "model": body.get("model", "azure-model"),
        "system_fingerprint": "fp_fake",
    }


def _logprobs(pieces: list[str], body: dict[str, Any]) -> dict[str, Any] | None:
    """Each token's logprob is -0.5; its alternatives `alt1`… follow at -1, -2, …"""
    if not body.get("logprobs"):
        return None
    top = body.get("top_logprobs") or 0
    content = [
        {
            "token": piece,
            "logprob": -0.5,
            "bytes": list(piece.encode()),
            "top_logprobs": [
                {"token": piece, "logprob": -0.5, "bytes": list(piece.encode())},
                *({"token": f"alt{k}", "logprob": -float(k), "bytes": None} for k in range(1, top)),
            ][:top],
        }
        for piece in pieces
    ]
    return {"content": content, "refusal": None}


def _usage(generations: list[Generation], body: dict[str, Any]) -> dict[str, int]:
    prompt = generations[0].prompt_tokens
    completion = sum(len(g.pieces) for g in generations)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
