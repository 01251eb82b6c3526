"""A loopback fake of Google's Gemini API, as its reference describes it:
`POST /v1beta/models/{model}:generateContent` and `:streamGenerateContent?alt=sse`, the key in
`x-goog-api-key`, unknown fields refused, `GenerateContentResponse` answers (streamed as CRLF SSE
with no end event: the last chunk carries `finishReason`), errors as
`{"error": {"code", "message", "status"}}`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp import web

from tests.conformance.fake_api import FakeAPI, Generation, Refused, require, sse

FIELDS = frozenset(
    {"contents", "generationConfig", "systemInstruction", "safetySettings", "tools", "toolConfig", "cachedContent"}
)
CONFIG_FIELDS = frozenset(
    {
        "stopSequences", "responseMimeType", "responseSchema", "candidateCount", "maxOutputTokens", "temperature",
        "topP", "topK", "seed", "presencePenalty", "frequencyPenalty", "responseLogprobs", "logprobs",
        "thinkingConfig", "responseModalities", "mediaResolution",
    }
)  # fmt: skip
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
        method = request.match_info["model_method"].partition(":")[2]
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
        for content in contents or []:
            parts = content.get("parts")
            require(
                isinstance(parts, list) and bool(parts), "* GenerateContentRequest.contents: parts must not be empty"
            )
        require(0 <= config.get("temperature", 0) <= 2, "temperature must be between 0 and 2")
        require(1 <= config.get("candidateCount", 1) <= 8, "candidateCount must be between 1 and 8")

    def is_stream(self, request: web.Request, body: dict[str, Any]) -> bool:
        return request.match_info["model_method"].endswith(":streamGenerateContent")

    def generations(self, body: dict[str, Any]) -> list[Generation]:
        config = body.get("generationConfig", {})
        prompt = "".join(part.get("text", "") for part in body["contents"][-1]["parts"])
        limit = config.get("maxOutputTokens")
        return [
            self.generate(prompt, j, limit, config.get("stopSequences")) for j in range(config.get("candidateCount", 1))
        ]

    def answer(self, request: web.Request, body: dict[str, Any]) -> dict[str, Any]:
        generations = self.generations(body)
        candidates = [_candidate(j, g.text, g, body) for j, g in enumerate(generations)]
        return {"candidates": candidates, "usageMetadata": _usage(generations), **_version(request)}

    def stream_events(self, request: web.Request, body: dict[str, Any]) -> tuple[list[bytes], list[bytes]]:
        generations = self.generations(body)
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


def _usage(generations: list[Generation]) -> dict[str, int]:
    prompt = generations[0].prompt_tokens
    completion = sum(len(g.pieces) for g in generations)
    return {"promptTokenCount": prompt, "candidatesTokenCount": completion, "totalTokenCount": prompt + completion}


def _version(request: web.Request) -> dict[str, str]:
    return {"modelVersion": request.match_info["model_method"].partition(":")[0], "responseId": "fake-response"}
