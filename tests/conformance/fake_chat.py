"""A loopback fake of OpenAI's Chat Completions API (`POST /v1/chat/completions`, Bearer key), as
the reference describes it: messages in, `chat.completion` (or `chat.completion.chunk` events
ending with `[DONE]`) out, unknown parameters refused."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from tests.conformance.fake_api import FakeAPI, Generation, require, sse

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
        unknown = sorted(set(body) - PARAMETERS - self.extra_parameters())
        require(not unknown, f"Unrecognized request argument supplied: {', '.join(unknown)}")
        require(isinstance(body.get("model"), str), "you must provide a model parameter")
        messages = body.get("messages")
        require(isinstance(messages, list) and bool(messages), "'messages' must be a non-empty array")
        for message in messages or []:
            require(message.get("role") in ("system", "developer", "user", "assistant"), "invalid role")
            require(isinstance(message.get("content"), str), "'content' must be a string here")
        require((messages or [{}])[-1].get("role") == "user", "the last message must be the user's")
        require("top_logprobs" not in body or body.get("logprobs") is True, "'top_logprobs' needs 'logprobs': true")
        require("stream_options" not in body or bool(body.get("stream")), "'stream_options' needs 'stream': true")
        require(not ("max_tokens" in body and "max_completion_tokens" in body), "give one of the max tokens fields")

    def extra_parameters(self) -> frozenset[str]:
        """What an OpenAI-compatible server accepts beyond OpenAI's list (vLLM takes `top_k`)."""
        return frozenset({"top_k"})

    def is_stream(self, request: web.Request, body: dict[str, Any]) -> bool:
        return bool(body.get("stream"))

    def generations(self, body: dict[str, Any]) -> list[Generation]:
        limit = body.get("max_completion_tokens", body.get("max_tokens"))
        stop = body.get("stop")
        stops = [stop] if isinstance(stop, str) else stop
        prompt = body["messages"][-1]["content"]
        return [self.generate(prompt, j, limit, stops) for j in range(body.get("n") or 1)]

    def answer(self, request: web.Request, body: dict[str, Any]) -> dict[str, Any]:
        generations = self.generations(body)
        choices = [
            {
                "index": j,
                "message": {"role": "assistant", "content": g.text, "refusal": None},
                "logprobs": _logprobs(g.pieces, body),
                "finish_reason": g.finish,
            }
            for j, g in enumerate(generations)
        ]
        return {**_head(body, "chat.completion"), "choices": choices, "usage": _usage(generations, body)}

    def stream_events(self, request: web.Request, body: dict[str, Any]) -> tuple[list[bytes], list[bytes]]:
        generations = self.generations(body)
        head = _head(body, "chat.completion.chunk")
        if (body.get("stream_options") or {}).get("include_usage"):
            head["usage"] = None

        def frame(j: int, delta: dict[str, Any], finish: str | None = None, logprobs: Any = None) -> bytes:
            return sse(
                {**head, "choices": [{"index": j, "delta": delta, "logprobs": logprobs, "finish_reason": finish}]}
            )

        roles = b"".join(frame(j, {"role": "assistant", "content": ""}) for j in range(len(generations)))
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

    def error_body(self, status: int, message: str, kind: str | None) -> dict[str, Any]:
        return {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": kind}}


def _head(body: dict[str, Any], obj: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": obj,
        "created": int(time.time()),
        "model": body["model"],
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
