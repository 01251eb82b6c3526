"""Request ids and the error envelope for every response, including aiohttp's own 404/405/413."""

from __future__ import annotations

import itertools
import logging
import re
import time
import uuid

from aiohttp import web
from aiohttp.typedefs import Handler

from gateway import access_log
from gateway.app_keys import ACCESS_FIELDS, MAX_BODY_BYTES, REQUEST_ID
from gateway.errors import GatewayError, InvalidRequest, NotFound

log = logging.getLogger(__name__)

_CLIENT_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:/=+-]{1,128}$")
# A random per-process prefix and a counter: unique across workers and replicas, and far
# cheaper per request than uuid4 (which reads the OS entropy pool every time).
_ID_PREFIX = f"req_{uuid.uuid4().hex[:16]}"
_id_counter = itertools.count(1)


def _new_request_id() -> str:
    return f"{_ID_PREFIX}{next(_id_counter):08x}"


class MethodNotAllowed(GatewayError):
    status = 405
    type = "invalid_request_error"
    code = "method_not_allowed"


class PayloadTooLarge(GatewayError):
    status = 413
    type = "invalid_request_error"
    code = "request_too_large"


@web.middleware
async def envelope_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    started = time.perf_counter()
    client_id = request.headers.get("x-request-id", "")
    request_id = client_id if _CLIENT_REQUEST_ID.match(client_id) else _new_request_id()
    request[REQUEST_ID] = request_id
    request[ACCESS_FIELDS] = {}
    try:
        response = await handler(request)
    except GatewayError as exc:
        response = error_response(exc)
    except web.HTTPException as exc:
        response = error_response(_from_http_exception(request, exc))
    except Exception:
        log.exception("unhandled error in request %s", request_id)
        response = error_response(GatewayError(f"The gateway failed unexpectedly (request id {request_id})."))
    if not response.prepared:
        response.headers["x-request-id"] = request_id
    if response.status >= 500:
        log.warning("request %s answered %s", request_id, response.status)
    access_log.write(request, response, started, request_id, request[ACCESS_FIELDS])
    return response


def error_response(exc: GatewayError) -> web.Response:
    return web.Response(status=exc.status, body=exc.body(), content_type="application/json", headers=exc.headers)


def _from_http_exception(request: web.Request, exc: web.HTTPException) -> GatewayError:
    if exc.status == 404:
        return NotFound(
            f"Unknown path: {request.method} {request.path}. Completions are served at POST /v1/completions."
        )
    if exc.status == 405:
        allowed = exc.headers.get("Allow", "")
        return MethodNotAllowed(
            f"Method {request.method} is not allowed on {request.path}; use {allowed or 'another method'}.",
            headers={"Allow": allowed} if allowed else None,
        )
    if exc.status == 413:
        limit = request.app[MAX_BODY_BYTES]
        return PayloadTooLarge(
            f"The request body is larger than this gateway accepts ({limit} bytes; server.max_body_bytes)."
        )
    if exc.status < 500:
        return InvalidRequest(exc.reason or "Invalid request.", status=exc.status)
    return GatewayError(exc.reason or "The gateway failed.", status=exc.status)
