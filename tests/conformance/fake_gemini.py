"""A loopback fake of Google's Gemini API, as its reference describes it:
`POST /v1beta/models/{model}:generateContent` and `:streamGenerateContent?alt=sse`, the key in
`x-goog-api-key`, unknown fields refused, `GenerateContentResponse` answers (streamed as CRLF SSE
with no end event: the last chunk carries `finishReason`), errors as
`{"error": {"code", "message", "status"}}`. Parts are text, inlineData, functionCall (model turns)
and functionResponse (naming a function declared in `tools`); given tools, the fake model calls one
(a functionCall part, finishReason STOP) unless the last turn holds function responses, which it
answers in text. `:embedContent` and `:batchEmbedContents` (at most 100 requests, each naming the
URL's model) answer deterministic `EMBEDDING_WIDTH`-wide vectors of the text, truncated (not
normalized) to `outputDimensionality`, with no token count, as the Gemini API answers."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from tests.conformance.fake_api import FakeAPI, Generation, Refused, require, sse, tool_arguments

FIELDS = frozenset(
    {"contents", "generationConfig", "systemInstruction", "safetySettings", "tools", "toolConfig", "cachedContent"}
)
CONFIG_FIELDS = frozenset(
    {
        "stopSequences", "responseMimeType", "responseSchema", "candidateCount", "maxOutputTokens", "temperature",
        "topP", "topK", "seed", "presencePenalty", "frequencyPenalty", "responseLogprobs", "logprobs",
        "thinkingConfig", "responseModalities", "mediaResolution", "responseJsonSchema",
    }
)  # fmt: skip
EMBED_FIELDS = frozenset({"model", "content", "taskType", "title", "outputDimensionality"})
EMBEDDING_WIDTH = 12
STATUSES = {
    400: "INVALID_ARGUMENT",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


@dataclass
class GeminiFake(FakeAPI):
    bad_key_status: int = 400  # Gemini answers a wrong key with 400 INVALID_ARGUMENT (API_KEY_INVALID)

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/v1beta/models/{model_method}", self.handle)

    def check(self, request: web.Request, body: dict[str, Any]) -> None:
        key = request.headers.get("x-goog-api-key")
        require(key is not None, "Method doesn't allow unregistered callers. Please use an API key.", 403)
        require(key == self.api_key, "API key not valid. Please pass a valid API key.", 400)
        model, _, method = request.match_info["model_method"].partition(":")
        if method in ("embedContent", "batchEmbedContents"):
            return _check_embed(f"models/{model}", method, body)
        require(method in ("generateContent", "streamGenerateContent"), f"Method not found: {method}", 404)
        require(method == "generateContent" or request.query.get("alt") == "sse", "stream without alt=sse")
        for name in sorted(set(body) - FIELDS):
            raise Refused(400, f'Invalid JSON payload received. Unknown name "{name}": Cannot find field.')
        config = body.get("generationConfig", {})
        for name in sorted(set(config) - CONFIG_FIELDS):
            raise Refused(400, f"Invalid JSON payload received. Unknown name \"{name}\" at 'generation_config'.")
        contents = body.get("contents")
        require(
            isinstance(contents, list) and bool(contents),
            "* GenerateContentRequest.contents: contents is not specified",
        )
        declared = {d["name"] for tool in body.get("tools", []) for d in tool.get("functionDeclarations", [])}
        for content in contents or []:
            parts = content.get("parts")
            require(
                isinstance(parts, list) and bool(parts), "* GenerateContentRequest.contents: parts must not be empty"
            )
            require(content.get("role", "user") in ("user", "model"), "Please use a valid role: user, model.")
            for part in parts or []:
                require(len(set(part) & {"text", "inlineData", "functionCall", "functionResponse"}) == 1, "bad part")
                named = (part.get("functionCall") or part.get("functionResponse") or {}).get("name")
                require(named is None or named in declared, f"function {named} is not declared in tools")
        for tool in body.get("tools", []):
            for declaration in tool.get("functionDeclarations", []):
                allowed = {"name", "description", "parameters", "parametersJsonSchema"}
                require(set(declaration) <= allowed, "Unknown name in 'function_declarations'")
        mode = ((body.get("toolConfig") or {}).get("functionCallingConfig") or {}).get("mode", "AUTO")
        require(mode in ("AUTO", "ANY", "NONE", "VALIDATED"), "Invalid value at 'tool_config'")
        require(0 <= config.get("temperature", 0) <= 2, "temperature must be between 0 and 2")
        require(1 <= config.get("candidateCount", 1) <= 8, "candidateCount must be between 1 and 8")

    def is_stream(self, request: web.Request, body: dict[str, Any]) -> bool:
        return request.match_info["model_method"].endswith(":streamGenerateContent")

    def generations(self, body: dict[str, Any]) -> list[Generation]:
        config = body.get("generationConfig", {})
        prompt = _prompt(body)
        limit = config.get("maxOutputTokens")
        return [
            self.generate(prompt, j, limit, config.get("stopSequences")) for j in range(config.get("candidateCount", 1))
        ]

    def answer(self, request: web.Request, body: dict[str, Any]) -> dict[str, Any]:
        if "requests" in body:
            return {"embeddings": [_embedding(item) for item in body["requests"]]}
        if "content" in body:
            return {"embedding": _embedding(body)}
        generations = self.generations(body)
        candidates = [_candidate(j, g.text, g, body) for j, g in enumerate(generations)]
        if _tool(body) is not None:
            candidates = [_call_candidate(j, body) for j in range(len(generations))]
        return {"candidates": candidates, "usageMetadata": _usage(generations), **_version(request)}

    def stream_events(self, request: web.Request, body: dict[str, Any]) -> tuple[list[bytes], list[bytes]]:
        generations = self.generations(body)
        if _tool(body) is not None:  # a function call comes whole, in the last chunk
            event = {"candidates": [_call_candidate(0, body)], "usageMetadata": _usage(generations)}
            return [b""], [sse({**event, **_version(request)}, newline=b"\r\n")]
        chunks: list[bytes] = []
        ends: list[bytes] = []
        for j, g in enumerate(generations):
            pieces = g.pieces or [""]
            for position, piece in enumerate(pieces):
                last = position == len(pieces) - 1
                candidate = _candidate(j, piece, g if last else None, body, [piece] if piece else [])
                frame = sse(
                    {"candidates": [candidate], "usageMetadata": _usage(generations), **_version(request)},
                    newline=b"\r\n",
                )
                (ends if last else chunks).append(frame)
        return chunks or [b""], ends

    def error_body(self, status: int, message: str, kind: str | None) -> dict[str, Any]:
        return {"error": {"code": status, "message": message, "status": kind or STATUSES.get(status, "UNKNOWN")}}


def _candidate(
    index: int, text: str, finished: Generation | None, body: dict[str, Any], pieces: list[str] | None = None
) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"parts": [{"text": text}], "role": "model"}, "index": index}
    if finished is not None:
        candidate["finishReason"] = "MAX_TOKENS" if finished.finish == "length" else "STOP"
    config = body.get("generationConfig", {})
    if config.get("responseLogprobs"):
        tokens = pieces if pieces is not None else (finished.pieces if finished else [])
        top = config.get("logprobs", 0)
        alternatives = [{"token": f"alt{k}", "logProbability": -float(k)} for k in range(1, top)]
        candidate["logprobsResult"] = {
            "chosenCandidates": [{"token": t, "logProbability": -0.25} for t in tokens],
            "topCandidates": [
                {"candidates": [{"token": t, "logProbability": -0.25}, *alternatives][:top]} for t in tokens
            ],
        }
    return candidate


def _prompt(body: dict[str, Any]) -> str:
    """What the fake model answers: the last turn's text, or the content of its function responses."""
    parts = body["contents"][-1]["parts"]
    responses = [str(p["functionResponse"]["response"].get("content", "")) for p in parts if "functionResponse" in p]
    return "".join(responses) or "".join(part.get("text", "") for part in parts)


def _tool(body: dict[str, Any]) -> str | None:
    declared = [d["name"] for tool in body.get("tools", []) for d in tool.get("functionDeclarations", [])]
    config = (body.get("toolConfig") or {}).get("functionCallingConfig") or {}
    answered = any("functionResponse" in part for part in body["contents"][-1]["parts"])
    if not declared or answered or config.get("mode") == "NONE":
        return None
    return str((config.get("allowedFunctionNames") or declared)[0])


def _call_candidate(index: int, body: dict[str, Any]) -> dict[str, Any]:
    call = {"name": _tool(body), "args": tool_arguments(_prompt(body))}
    return {"content": {"parts": [{"functionCall": call}], "role": "model"}, "index": index, "finishReason": "STOP"}


def _usage(generations: list[Generation]) -> dict[str, int]:
    prompt = generations[0].prompt_tokens
    completion = sum(len(g.pieces) for g in generations)
    return {"promptTokenCount": prompt, "candidatesTokenCount": completion, "totalTokenCount": prompt + completion}


def _version(request: web.Request) -> dict[str, str]:
    return {"modelVersion": request.match_info["model_method"].partition(":")[0], "responseId": "fake-response"}


def _check_embed(model: str, method: str, body: dict[str, Any]) -> None:
    if method == "batchEmbedContents":
        require(set(body) == {"requests"}, "Invalid JSON payload received. Unknown name: Cannot find field.")
        requests = body["requests"]
        require(isinstance(requests, list) and bool(requests), "* BatchEmbedContentsRequest.requests: is empty")
        require(len(requests) <= 100, "* BatchEmbedContentsRequest.requests: at most 100 requests can be in a batch")
        for item in requests:
            require(item.get("model") == model, f"Model names should match: {item.get('model')} vs {model}")
            _check_embed_request(item)
    else:
        _check_embed_request(body)


def _check_embed_request(item: dict[str, Any]) -> None:
    for name in sorted(set(item) - EMBED_FIELDS):
        raise Refused(400, f'Invalid JSON payload received. Unknown name "{name}": Cannot find field.')
    parts = (item.get("content") or {}).get("parts")
    require(isinstance(parts, list) and bool(parts), "* EmbedContentRequest.content: contains an empty Part")
    require(all(isinstance(part.get("text"), str) for part in parts or []), "only text parts are embedded")
    size = item.get("outputDimensionality")
    require(
        size is None or 1 <= int(size) <= EMBEDDING_WIDTH, f"outputDimensionality must be at most {EMBEDDING_WIDTH}"
    )


def embedding_values(text: str, size: int = EMBEDDING_WIDTH) -> list[float]:
    """The fake model's vector of `text`: unit length at full width, its first `size` values otherwise."""
    digest = hashlib.sha256(text.encode()).digest()
    raw = [(byte - 127.5) / 127.5 for byte in digest[:EMBEDDING_WIDTH]]
    norm = math.sqrt(sum(value * value for value in raw))
    return [value / norm for value in raw][:size]


def _embedding(item: dict[str, Any]) -> dict[str, Any]:
    text = "".join(part["text"] for part in item["content"]["parts"])
    return {"values": embedding_values(text, item.get("outputDimensionality") or EMBEDDING_WIDTH)}
