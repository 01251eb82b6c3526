"""The one place the OpenAI error envelope is produced.

Every failure the gateway reports, as a JSON body or as an SSE frame after a stream started,
goes through `GatewayError`, so clients (the `openai` SDK above all) can always parse it.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

import orjson

CLIENT_CLOSED = 499  # nginx's status for a request whose client went away before the answer


class GatewayError(Exception):
    """An error with an HTTP status and the fields of OpenAI's error object."""

    status: int = 500
    type: str = "server_error"
    code: str | None = "internal_error"
    close_connection: bool = False  # the response closes the connection (its body may be left unread)

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
        try:
            return orjson.dumps(self.envelope())
        except orjson.JSONEncodeError:  # text holding lone surrogates (undecodable request bytes)
            return orjson.dumps(_encodable(self.envelope()))

    def sse_frame(self) -> bytes:
        return b"data: " + self.body() + b"\n\n"


def _encodable(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode()
    if isinstance(value, dict):
        return {key: _encodable(item) for key, item in value.items()}
    return value


class InvalidRequest(GatewayError):
    status = 400
    type = "invalid_request_error"
    code = "invalid_value"


def status_code_name(status: int) -> str:
    """`bad_request` for 400: the `code` of a status that has none of its own here (aiohttp's pages)."""
    try:
        return HTTPStatus(status).phrase.lower().replace(" ", "_").replace("-", "_")
    except ValueError:
        return "http_error"


def invalid_header(header: str, detail: str) -> InvalidRequest:
    """A 400 naming the header, never quoting its value (it may be a key)."""
    return InvalidRequest(f"Invalid {header} header: {detail}.", param=header, code="invalid_header")


class RequestTimeout(GatewayError):
    """The client did not send its request (headers or body) in time; the connection is closed."""

    status = 408
    type = "invalid_request_error"
    code = "request_timeout"
    close_connection = True


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
    """An upstream 4xx, passed through with its own status and error fields (its `code` too, even null)."""

    type = "invalid_request_error"
    code = None
