"""The Embeddings API's answer, for backends that compute vectors themselves (the mock, the local
engine) or translate another API's (Gemini): one place writes OpenAI's shape and encodings.

`encoding_format: base64` is the vector's little-endian float32 bytes in base64, as OpenAI encodes
it (what the `openai` SDK asks for by default, and decodes with numpy's `<f4`). `dimensions`
shortens a vector the way OpenAI's shortening models do: its first `dimensions` values,
normalized again to unit length.
"""

from __future__ import annotations

import base64
import math
import struct
from collections.abc import Sequence
from typing import Any

import orjson

from gateway.api.errors import InvalidRequest
from providers.base import CompletionResult

CHARS_PER_TOKEN = 4  # the figure the gateway's limits estimate a text's tokens with (policies.limits.estimate)


def estimated_tokens(inputs: Sequence[str | Sequence[int]]) -> int:
    """Input tokens for an upstream whose answer does not count them: texts at `CHARS_PER_TOKEN`."""
    return sum(-(-len(item) // CHARS_PER_TOKEN) if isinstance(item, str) else len(item) for item in inputs)


def encode(vector: Sequence[float], encoding_format: Any) -> list[float] | str:
    if encoding_format == "base64":
        return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
    return [float(value) for value in vector]


def normalized(vector: Sequence[float]) -> list[float]:
    norm = math.sqrt(math.fsum(value * value for value in vector))
    return [value / norm for value in vector] if norm > 0 else list(vector)


def shortened(vector: Sequence[float], dimensions: int | None) -> list[float]:
    """The vector's first `dimensions` values at unit length (as given when `dimensions` is None)."""
    return list(vector) if dimensions is None else normalized(vector[:dimensions])


def check_dimensions(body: dict[str, Any], width: int, *, shortens: bool, deployment: str) -> int | None:
    """The `dimensions` asked for, or a 400 naming it where the model cannot give them."""
    dimensions = body.get("dimensions")
    if dimensions is None:
        return None
    if not shortens:
        raise InvalidRequest(
            f"Invalid 'dimensions': the model of deployment '{deployment}' does not support shortening "
            f"its embeddings; leave 'dimensions' out (it gives {width} dimensions).",
            param="dimensions",
            code="invalid_value",
        )
    if not isinstance(dimensions, int) or not 1 <= dimensions <= width:
        raise InvalidRequest(
            f"Invalid 'dimensions': must be from 1 to {width} for the model of deployment '{deployment}' "
            f"(got {dimensions}).",
            param="dimensions",
            code="invalid_value",
        )
    return dimensions


def answer(
    vectors: Sequence[Sequence[float]], model: str, prompt_tokens: int, encoding_format: Any
) -> CompletionResult:
    """OpenAI's answer: the embeddings in input order, the model, the input tokens used."""
    body: dict[str, Any] = {
        "object": "list",
        "data": [
            {"object": "embedding", "index": index, "embedding": encode(vector, encoding_format)}
            for index, vector in enumerate(vectors)
        ],
        "model": model,
        "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens},
    }
    return CompletionResult(raw=orjson.dumps(body), body=body)
