"""Anthropic's error shape for every error of the Messages path.

Anthropic's SDKs pick their exception class from the status and read `{"type": "error", "error":
{"type", "message"}}`. Every `GatewayError` raised on this path (auth, limits, budgets, guardrails,
routing, upstream failures) is rewritten here, keeping its status, headers (`retry-after`) and
code (for the metrics and the access log).
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.api.errors import GatewayError

_BY_STATUS = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    529: "overloaded_error",
}


def error_type(status: int) -> str:
    """Anthropic's error type for an HTTP status."""
    known = _BY_STATUS.get(status)
    if known is not None:
        return known
    return "invalid_request_error" if status < 500 else "api_error"


class AnthropicError(GatewayError):
    """A gateway error in Anthropic's envelope, for the body and for a stream's `event: error`."""

    def __init__(self, error: GatewayError) -> None:
        super().__init__(
            error.message,
            param=error.param,
            code=error.code,
            status=error.status,
            type=error_type(error.status),
            headers=error.headers,
            upstream_status=error.upstream_status,
        )
        self.close_connection = error.close_connection

    def envelope(self) -> dict[str, Any]:
        return {"type": "error", "error": {"type": self.type, "message": self.message}}

    def sse_frame(self) -> bytes:
        return b"event: error\ndata: " + self.body() + b"\n\n"


def anthropic_error(error: GatewayError) -> AnthropicError:
    return error if isinstance(error, AnthropicError) else AnthropicError(error)


def error_event(error: GatewayError) -> bytes:
    return anthropic_error(error).sse_frame()


def error_body(error: GatewayError) -> bytes:
    return orjson.dumps(anthropic_error(error).envelope())
