"""Loopback fakes of the OpenAI Completions API (`POST /v1/completions`, Bearer key) and of Azure
OpenAI's form of it (`/openai/deployments/{deployment}/completions?api-version=…`, `api-key`); both
serve the Chat Completions API beside it (`…/chat/completions`, as `fake_chat` does), and the
Responses API (`POST /v1/responses`, `DELETE /v1/responses/{id}`; Azure's v1 API at
`/openai/v1/responses`, the model deployment named in the body) for a deployment with
`responses: native`: `tests.support.fake_responses`' API, its model the fake's `generate`."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from tests.conformance.fake_api import FakeAPI, Generation, Refused, Seen, require, sse, tool_arguments
from tests.conformance.fake_chat import chat_answer, chat_stream_events, check_chat_body
from tests.support.fake_responses import ResponsesAPI, Turn, item_text
from tests.support.fake_responses import frame as event_frame
from tests.support.fake_upstream import embeddings_answer

RESPONSES_PARAMETERS = frozenset(
    {
        "model", "input", "instructions", "max_output_tokens", "max_tool_calls", "temperature", "top_p",
        "top_logprobs", "tools", "tool_choice", "parallel_tool_calls", "text", "reasoning", "previous_response_id",
        "conversation", "store", "metadata", "include", "truncation", "user", "safety_identifier", "stream",
        "stream_options", "background", "service_tier", "prompt", "prompt_cache_key", "prompt_cache_retention",
    }
)  # fmt: skip


def is_chat(request: web.Request) -> bool:
    return request.path.endswith("/chat/completions")


def is_responses(request: web.Request) -> bool:
    return request.path.endswith("/responses")


@dataclass(kw_only=True)
class GeneratedResponses(ResponsesAPI):
    """The Responses API whose model is a conformance fake's: given function tools, it calls one (the
    one `tool_choice` names, else the first) with `tool_arguments` of the user's last message; after
    a tool's result, or given none, it answers `generate` of that text (cut by max_output_tokens)."""

    fake: FakeAPI

    def turn(self, body: dict[str, Any], conversation: list[dict[str, Any]]) -> Turn:
        last = conversation[-1] if conversation else {}
        prompt = item_text(last)
        tool = called_function(body) if last.get("type") == "message" else None
        if tool is not None:
            arguments = orjson.dumps(tool_arguments(prompt)).decode()
            return Turn(call=(tool, arguments), usage=usage(len(prompt.split()), 2))
        generation = self.fake.generate(prompt, 0, body.get("max_output_tokens"))
        counts = usage(generation.prompt_tokens, len(generation.pieces))
        return Turn(generation.text, incomplete=generation.finish == "length", usage=counts)


def called_function(body: dict[str, Any]) -> str | None:
    functions = [tool["name"] for tool in body.get("tools") or () if tool.get("type") == "function"]
    choice = body.get("tool_choice")
    if not functions or choice == "none":
        return None
    return str(choice["name"]) if isinstance(choice, dict) and choice.get("type") == "function" else functions[0]


def usage(prompt: int, completion: int) -> dict[str, Any]:
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + completion,
    }


def prompt_texts(prompt: Any) -> list[str]:
    """Every prompt shape the API takes, as texts (token ids are spelled out)."""
    if isinstance(prompt, str):
        return [prompt]
    if prompt and all(isinstance(item, int) for item in prompt):
        return [" ".join(map(str, prompt))]
    return [item if isinstance(item, str) else " ".join(map(str, item)) for item in prompt]


@dataclass
class OpenAICompletionsFake(FakeAPI):
    responses: GeneratedResponses = field(init=False)  # its Responses API, what it keeps

    def __post_init__(self) -> None:
        self.responses = GeneratedResponses(fake=self)

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/completions", self.handle)
        app.router.add_post("/v1/chat/completions", self.handle)
        app.router.add_post("/v1/responses", self.handle)
        app.router.add_delete("/v1/responses/{response_id}", self.delete_response)

    def authorized(self, request: web.Request) -> None:
        given = request.headers.get("Authorization", "")
        require(given == f"Bearer {self.api_key}", f"Incorrect API key provided: {given[7:]}.", 401, "invalid_api_key")

    def check(self, request: web.Request, body: dict[str, Any]) -> None:
        self.authorized(request)
        if is_responses(request):
            self.check_responses_body(body)
        elif is_chat(request):
            check_chat_body(body)
        else:
            self.check_body(body)

    def check_responses_body(self, body: dict[str, Any]) -> None:
        """What OpenAI refuses of a Responses body."""
        for name in sorted(set(body) - RESPONSES_PARAMETERS):
            raise Refused(400, f"Unknown parameter: '{name}'.", "unknown_parameter")
        require(
            isinstance(body.get("model"), str),
            "Missing required parameter: 'model'.",
            kind="missing_required_parameter",
        )
        refused = self.responses.refusal(body)
        if refused is not None:
            raise Refused(400, refused["message"], refused["code"])

    def holds(self, response_id: str) -> bool:
        return response_id in self.responses.stored

    async def delete_response(self, request: web.Request) -> web.Response:
        self.received.append(Seen(request.path, dict(request.query), request.headers.copy(), {}))
        try:
            self.authorized(request)
        except Refused as refused:
            return self._error(refused.status, refused.message, refused.kind)
        response_id = request.match_info["response_id"]
        if not self.responses.delete(response_id):
            return self._error(404, f"Response with id '{response_id}' not found.")
        return web.json_response({"id": response_id, "object": "response", "deleted": True})

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
        if is_responses(request):
            return self.responses.respond(body)
        if is_chat(request):
            return chat_answer(self, body)
        generations = self.generations(body)
        choices = [
            {"text": g.text, "index": index, "logprobs": None, "finish_reason": g.finish}
            for index, g in enumerate(generations)
        ]
        return {**self._head(body), "choices": choices, "usage": _usage(generations, body)}

    def stream_events(self, request: web.Request, body: dict[str, Any]) -> tuple[list[bytes], list[bytes]]:
        if is_responses(request):
            events = self.responses.events(self.responses.respond(body))
            # The text ends with the last delta; what follows (the `.done` events, the closing one) ends it.
            cut = 1 + max((n for n, event in enumerate(events) if event["type"].endswith(".delta")), default=1)
            return [event_frame(event) for event in events[:cut]], [event_frame(event) for event in events[cut:]]
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
        app.router.add_post("/openai/v1/responses", self.handle)  # the v1 API: no api-version
        app.router.add_delete("/openai/v1/responses/{response_id}", self.delete_response)

    def answer(self, request: web.Request, body: dict[str, Any]) -> dict[str, Any]:
        if request.path.endswith("/embeddings"):  # Azure's embeddings: OpenAI's answer, the model its own
            answer: dict[str, Any] = orjson.loads(embeddings_answer({**body, "model": "text-embedding-3-small"}))
            return answer
        return super().answer(request, body)

    def authorized(self, request: web.Request) -> None:
        require(
            request.headers.get("api-key") == self.api_key,
            "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key "
            "for an active subscription and use a correct regional API endpoint for your resource.",
            401,
            "401",
        )

    def check(self, request: web.Request, body: dict[str, Any]) -> None:
        self.authorized(request)
        if is_responses(request):  # the model deployment, named in the body
            message = "The API deployment for this resource does not exist."
            require(body.get("model") == self.deployment, message, 404, "DeploymentNotFound")
            self.check_responses_body(body)
            return
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
