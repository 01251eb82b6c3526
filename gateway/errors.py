"""The one place the OpenAI error envelope is produced.

Every failure the gateway reports, as a JSON body or as an SSE frame after a stream started,
goes through `GatewayError`, so clients (the `openai` SDK above all) can always parse it.
"""

from __future__ import annotations

from typing import Any

import orjson


class GatewayError(Exception):
    """An error with an HTTP status and the fields of OpenAI's error object."""

    status: int = 500
    type: str = "server_error"
    code: str | None = None

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        status: int | None = None,
        type: str | None = None,
        headers: dict[str, str] | None = None,
        upstream_status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status
        if type is not None:
            self.type = type
        self.headers = headers or {}
        self.upstream_status = upstream_status  # the provider's own HTTP status, when it answered

    def envelope(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }

    def body(self) -> bytes:
        return orjson.dumps(self.envelope())

    def sse_frame(self) -> bytes:
        return b"data: " + self.body() + b"\n\n"


class InvalidRequest(GatewayError):
    status = 400
    type = "invalid_request_error"


class AuthenticationFailed(GatewayError):
    status = 401
    type = "authentication_error"
    code = "invalid_api_key"


class PermissionDenied(GatewayError):
    status = 403
    type = "permission_error"
    code = "deployment_not_allowed"


class NotFound(GatewayError):
    status = 404
    type = "invalid_request_error"
    code = "not_found"


class DeploymentUnavailable(GatewayError):
    status = 503
    type = "service_unavailable"
    code = "deployment_unavailable"


class UpstreamError(GatewayError):
    """The upstream failed (5xx, connection error, malformed answer): 502."""

    status = 502
    type = "upstream_error"
    code = "bad_gateway"


class UpstreamTimeout(GatewayError):
    status = 504
    type = "timeout"
    code = "upstream_timeout"


class UpstreamRejected(GatewayError):
    """An upstream 4xx, passed through with its own status and error fields."""

    type = "invalid_request_error"
