"""Loopback fakes of the OpenAI Completions API (`POST /v1/completions`, Bearer key) and of Azure
OpenAI's form of it (`/openai/deployments/{deployment}/completions?api-version=…`, `api-key`); both
serve the Chat Completions API beside it (`…/chat/completions`, as `fake_chat` does)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from tests.conformance.fake_api import FakeAPI, Generation, require, sse
from tests.conformance.fake_chat import chat_answer, chat_stream_events, check_chat_body
from tests.support.fake_upstream import embeddings_answer


def is_chat(request: web.Request) -> bool:
    return request.path.endswith("/chat/completions")


def prompt_texts(prompt: Any) -> list[str]:
    """Every prompt shape the API takes, as texts (token ids are spelled out)."""
    if isinstance(prompt, str):
        return [prompt]
    if prompt and all(isinstance(item, int) for item in prompt):
        return [" ".join(map(str, prompt))]
    return [item if isinstance(item, str) else " ".join(map(str, item)) for item in prompt]


@dataclass
class OpenAICompletionsFake(FakeAPI):
    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/completions", self.handle)
        app.router.add_post("/v1/chat/completions", self.handle)

    def check(self, request: web.Request, body: dict[str, Any]) -> None:
        given = request.headers.get("Authorization", "")
        require(given == f"Bearer {self.api_key}", f"Incorrect API key provided: {given[7:]}.", 401, "invalid_api_key")
        if is_chat(request):
            check_chat_body(body)
        else:
            self.check_body(body)

    def check_body(self, body: dict[str, Any]) -> None:
        require("model" in body, "you must provide a model parameter", kind="missing_model")
        require("prompt" in body, "Missing required parameter: 'prompt'.", kind="missing_prompt")

    def is_stream(self, request: web.Request, body: dict[str, Any]) -> bool:
        return bool(body.get("stream"))

    def generations(self, body: dict[str, Any]) -> list[Generation]:
        """In OpenAI's order: prompt i, sample j at index i*n + j."""
        max_tokens = body.get("max_tokens", 16)
        stop = body.get("stop")
        stops = [stop] if isinstance(stop, str) else stop
        n = body.get("n") or 1
        return [self.generate(p, j, max_tokens, stops) for p in prompt_texts(body["prompt"]) for j in range(n)]

    def answer(self, request: web.Request, body: dict[str, Any]) -> dict[str, Any]:
        if is_chat(request):
            return chat_answer(self, body)
        generations = self.generations(body)
        choices = [
            {"text": g.text, "index": index, "logprobs": None, "finish_reason": g.finish}
            for index, g in enumerate(generations)
        ]
        return {**self._head(body), "choices": choices, "usage": _usage(generations, body)}

    def stream_events(self, request: web.Request, body: dict[str, Any]) -> tuple[list[bytes], list[bytes]]:
        if is_chat(request):
            return chat_stream_events(self, body)
        generations = self.generations(body)
        head = self._head(body)

        def frame(index: int, text: str, finish: str | None) -> bytes:
            choice = {"text": text, "index": index, "logprobs": None, "finish_reason": finish}
            return sse({**head, "choices": [choice]})

        text = [frame(i, piece, None) for i, g in enumerate(generations) for piece in g.pieces]
        end = [frame(i, "", g.finish) for i, g in enumerate(generations)]
        if (body.get("stream_options") or {}).get("include_usage"):
            end.append(sse({**head, "choices": [], "usage": _usage(generations, body)}))
        return text, [*end, b"data: [DONE]\n\n"]

    def error_body(self, status: int, message: str, kind: str | None) -> dict[str, Any]:
        return {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": kind}}

    def _head(self, body: dict[str, Any]) -> dict[str, Any]:
        return {"id": "cmpl-fake", "object": "text_completion", "created": int(time.time()), "model": body["model"]}


@dataclass
class AzureOpenAIFake(OpenAICompletionsFake):
    deployment: str = "instruct-east"

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/openai/deployments/{deployment}/completions", self.handle)
        app.router.add_post("/openai/deployments/{deployment}/chat/completions", self.handle)
        app.router.add_post("/openai/deployments/{deployment}/embeddings", self.handle)

    def answer(self, request: web.Request, body: dict[str, Any]) -> dict[str, Any]:
        if request.path.endswith("/embeddings"):  # Azure's embeddings: OpenAI's answer, the model its own
            answer: dict[str, Any] = orjson.loads(embeddings_answer({**body, "model": "text-embedding-3-small"}))
            return answer
        return super().answer(request, body)

    def check(self, request: web.Request, body: dict[str, Any]) -> None:
        require(
            request.headers.get("api-key") == self.api_key,
            "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key "
            "for an active subscription and use a correct regional API endpoint for your resource.",
            401,
            "401",
        )
        require("api-version" in request.query, "Resource not found", 404, "404")
        require(
            request.match_info["deployment"] == self.deployment,
            "The API deployment for this resource does not exist.",
            404,
            "DeploymentNotFound",
        )
        if request.path.endswith("/embeddings"):
            require(bool(body.get("input")), "'input' is a required property")
        elif is_chat(request):
            check_chat_body(body, needs_model=False)
        else:
            require("prompt" in body, "Missing required parameter: 'prompt'.")

    def error_body(self, status: int, message: str, kind: str | None) -> dict[str, Any]:
        return {"error": {"code": kind or str(status), "message": message, "param": None, "type": None}}


def _usage(generations: list[Generation], body: dict[str, Any]) -> dict[str, int]:
    prompt = sum(len(p.split()) for p in prompt_texts(body["prompt"]))
    completion = sum(len(g.pieces) for g in generations)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
