"""Translate an upstream's HTTP error answer into a `GatewayError`, with no credential in it."""

from __future__ import annotations

import re
from typing import Any

import orjson

from gateway.errors import GatewayError, UpstreamError, UpstreamRejected

# Shapes of provider credentials that upstream messages sometimes quote back (even masked).
_KEY_LIKE = re.compile(r"\b(?:sk|pk|rk|key|api[-_]?key)[-_][A-Za-z0-9_\-*.]{6,}", re.IGNORECASE)
_PASSTHROUGH_HEADERS = ("retry-after", "retry-after-ms")


def scrub(text: str, secrets: tuple[str, ...]) -> str:
    """Remove known secrets and anything shaped like an API key from an upstream message."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "[redacted]")
    return _KEY_LIKE.sub("[redacted]", text)


def upstream_status_error(
    status: int,
    raw: bytes,
    headers: dict[str, str],
    *,
    deployment: str,
    secrets: tuple[str, ...],
) -> GatewayError:
    """4xx pass through with their status and fields; 5xx (and anything odd) become 502."""
    fields = _error_fields(raw)
    message = scrub(str(fields.get("message") or _snippet(raw) or f"HTTP {status}"), secrets)
    kept = {name: headers[name] for name in _PASSTHROUGH_HEADERS if name in headers}
    if 400 <= status < 500:
        return UpstreamRejected(
            message,
            status=status,
            type=_str_or_none(fields.get("type")) or "invalid_request_error",
            param=_str_or_none(fields.get("param")),
            code=_str_or_none(fields.get("code")),
            headers=kept,
            upstream_status=status,
        )
    return UpstreamError(
        f"The upstream of deployment '{deployment}' failed with HTTP {status}: {message}",
        code="upstream_http_error",
        headers=kept,  # a 503's Retry-After also tells the client (and the retry loop) when to come back
        upstream_status=status,
    )


def _error_fields(raw: bytes) -> dict[str, Any]:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return {}
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            return error
        if isinstance(error, str):  # vLLM, TGI and llama.cpp variants
            return {"message": error}
        if isinstance(body.get("message"), str):
            return {"message": body["message"]}
    return {}


def _snippet(raw: bytes) -> str:
    return raw[:300].decode("utf-8", "replace").strip()


def _str_or_none(value: Any) -> str | None:
    return None if value is None else str(value)
