"""An Embeddings request as Gemini's `embedContent` / `batchEmbedContents`, and their answers back.

One input is one `models/{model}:embedContent` call; a list is `:batchEmbedContents`, at most
`BATCH_LIMIT` inputs a call (Gemini's own limit): a longer list becomes that many calls, made
concurrently and joined in input order (bounded by `max_fanout`). `dimensions` is
`outputDimensionality`: Gemini truncates, but leaves a shortened vector unnormalized, so the
provider normalizes it again as OpenAI does. Gemini embeds text, so token-id inputs are a 400
naming `input`; it has no end-user field, so `user` is a 400 unless the deployment drops it.

Usage: the Gemini API's embed answers carry no token count (only the embedding); where an answer
does give one (`usageMetadata.promptTokenCount`, as Vertex AI's does) it is used, else the input
tokens are the gateway's estimate (4 characters a token, the figure the limits use). Errors are
Gemini's `{"error": {...}}`, mapped by the adapter's `error_answer` like any other Gemini call.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from gateway.api.embeddings import inputs_of
from gateway.api.errors import InvalidRequest
from providers.completion_params import Reference, check_params
from providers.translated.adapter import AnswerProblem, Embedded, UpstreamCall

BATCH_LIMIT = 100  # batchEmbedContents takes at most 100 requests
EMBEDDINGS = Reference(
    "Embeddings",
    frozenset({"model", "input", "encoding_format", "dimensions"}),
    {"user": lambda value, body: value is None},
)


def plan_calls(
    body: dict[str, Any], url: str, resource: str, *, drop: Collection[str], deployment: str, api: str
) -> list[UpstreamCall]:
    """The calls for `body`; `url` ends where the method goes (`…/models/x`), `resource` is `models/x`."""
    body = check_params(body, {}, drop=drop, deployment=deployment, api=api, reference=EMBEDDINGS)
    texts = _texts(body, deployment, api)
    extra: dict[str, Any] = {}
    if body.get("dimensions") is not None:
        extra["outputDimensionality"] = body["dimensions"]
    if len(texts) == 1:
        return [UpstreamCall(f"{url}:embedContent", {"content": _content(texts[0]), **extra}, 1, "embeddings")]
    calls = []
    for start in range(0, len(texts), BATCH_LIMIT):
        part = texts[start : start + BATCH_LIMIT]
        requests = [{"model": resource, "content": _content(text), **extra} for text in part]
        calls.append(UpstreamCall(f"{url}:batchEmbedContents", {"requests": requests}, len(part), "embeddings"))
    return calls


def embedded(call: UpstreamCall, answer: dict[str, Any]) -> Embedded:
    """`{"embedding": {"values"}}` (embedContent) or `{"embeddings": [{"values"}]}`, one per input."""
    found: Any = [answer.get("embedding")] if call.url.endswith(":embedContent") else answer.get("embeddings")
    if not isinstance(found, list) or len(found) != call.choices:
        raise AnswerProblem(f"answered with {_count(found)} embeddings for {call.choices} inputs")
    vectors = [_values(item) for item in found]
    usage = answer.get("usageMetadata")
    counted = usage.get("promptTokenCount") if isinstance(usage, dict) else None
    return Embedded(vectors, counted if type(counted) is int else None)


def _texts(body: dict[str, Any], deployment: str, api: str) -> list[str]:
    inputs = inputs_of(body.get("input"))
    if all(isinstance(item, str) for item in inputs):
        return [str(item) for item in inputs]
    raise InvalidRequest(
        f"The deployment '{deployment}' cannot honour 'input': {api} embeds text, so token ids cannot be sent; "
        "give a string or an array of strings.",
        param="input",
        code="unsupported_parameter",
    )


def _content(text: str) -> dict[str, Any]:
    return {"parts": [{"text": text}]}


def _values(item: Any) -> list[float]:
    values = item.get("values") if isinstance(item, dict) else None
    if not isinstance(values, list) or not values or not all(type(v) in (int, float) for v in values):
        raise AnswerProblem("answered with an embedding without its 'values'")
    return [float(value) for value in values]


def _count(found: Any) -> str:
    return str(len(found)) if isinstance(found, list) else "no list of"
