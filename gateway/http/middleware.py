"""Request ids, the error envelope for every response (aiohttp's own 404/405/413 included), the
checks every request passes before its handler (the headers the gateway reads, the body's deadline),
and each request's record for the metrics and the access log."""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import re
import traceback
import uuid

from aiohttp import web
from aiohttp.streams import StreamReader
from aiohttp.typedefs import Handler, Middleware

from gateway.api.errors import GatewayError, InvalidRequest, NotFound, RequestTimeout, status_code_name
from gateway.api.messages.errors import anthropic_error
from gateway.http.app_keys import MAX_BODY_BYTES, RECORD
from gateway.http.protocol import HttpTimeouts, MalformedBody
from gateway.http.request_headers import check_headers, redact
from gateway.keys.throttle import AUTH_CLIENT, AuthClient, FailureThrottle
from gateway.observability.record import RequestRecord
from gateway.observability.recorder import Observability

log = logging.getLogger(__name__)

MESSAGES_PREFIX = "/v1/messages"
_CLIENT_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:/=+-]{1,128}$")
# A random per-process prefix and a counter: unique across workers and replicas, and far
# cheaper per request than uuid4 (which reads the OS entropy pool every time). A forked worker
# draws its own prefix: it would otherwise repeat its siblings' ids (the request log's key).
_ID_PREFIX = f"req_{uuid.uuid4().hex[:16]}"
_id_counter = itertools.count(1)


def _draw_id_prefix() -> None:
    global _ID_PREFIX, _id_counter
    _ID_PREFIX, _id_counter = f"req_{uuid.uuid4().hex[:16]}", itertools.count(1)


os.register_at_fork(after_in_child=_draw_id_prefix)


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


def envelope_middleware(observability: Observability, timeouts: HttpTimeouts, throttle: FailureThrottle) -> Middleware:
    """The outermost middleware of an app whose metrics and access log are `observability`; its
    objects are bound here, once, rather than looked up in the app on every request. It also tells
    authentication who the client is (its transport peer), so that failed authentications are
    counted and throttled per address (`throttle`: one per app, so it outlives config reloads)."""

    @web.middleware
    async def envelope(request: web.Request, handler: Handler) -> web.StreamResponse:
        client_id = request.headers.get("x-request-id", "")
        request_id = client_id if _CLIENT_REQUEST_ID.match(client_id) else _new_request_id()
        record = request[RECORD] = observability.begin(request, request_id)
        deadline = _body_deadline(request, timeouts)
        client = AUTH_CLIENT.set(AuthClient(request.remote, throttle, observability.auth_failure))
        try:
            response = await _respond(request, handler, record)
        except BaseException:  # cancelled: the client went away (or the server is stopping)
            observability.end(record, None)
            raise
        finally:
            AUTH_CLIENT.reset(client)
            if deadline is not None:
                deadline.cancel()
        if not response.prepared:
            response.headers["x-request-id"] = request_id
        if response.status >= 500:
            log.warning("request %s answered %s", request_id, response.status)
        if observability.wants_bodies:
            await observability.keep_bodies(request, record, response)
        observability.end(record, response)
        return response

    return envelope


async def _respond(request: web.Request, handler: Handler, record: RequestRecord) -> web.StreamResponse:
    """The handler's response, or the error envelope for whatever it raised."""
    try:
        check_headers(request.headers)
        return await handler(request)
    except GatewayError as exc:
        record.error_code = exc.code or exc.type
        return error_response(_shaped(request, exc))
    except web.HTTPException as exc:
        error = _from_http_exception(request, exc)
        record.error_code = error.code or error.type
        return error_response(_shaped(request, error))
    except web.RequestPayloadError:  # the body's chunked framing or Content-Encoding is broken
        record.error_code = "invalid_http"
        return error_response(_shaped(request, MalformedBody()))
    except Exception as exc:
        # The traceback without any header's value: an exception's message may quote one.
        log.error("unhandled error in request %s:\n%s", record.request_id, _traceback(exc, request))
        record.error_code = "internal_error"
        failed = GatewayError(f"The gateway failed unexpectedly (request id {record.request_id}).")
        return error_response(_shaped(request, failed))


def _shaped(request: web.Request, error: GatewayError) -> GatewayError:
    """Anthropic's error shape on the Messages paths (a header refused before the handler, a wrong
    method, an unknown path under them), OpenAI's everywhere else."""
    return anthropic_error(error) if request.path.startswith(MESSAGES_PREFIX) else error


def _traceback(exc: Exception, request: web.Request) -> str:
    return redact("".join(traceback.format_exception(exc)), request.headers.items())


def _body_deadline(request: web.Request, timeouts: HttpTimeouts) -> asyncio.TimerHandle | None:
    """While the body is still on its way: a timer that fails its reads with a 408 once
    `server.body_timeout_s` has passed (None for a body already whole)."""
    content = request.content
    if content.is_eof():
        return None
    return asyncio.get_running_loop().call_later(timeouts.body_s, _expire_body, content, timeouts.body_s)


def _expire_body(content: StreamReader, timeout_s: float) -> None:
    if not content.is_eof():
        content.set_exception(
            RequestTimeout(f"The request body did not arrive within {timeout_s:g} seconds (server.body_timeout_s).")
        )


def error_response(exc: GatewayError) -> web.Response:
    response = web.Response(status=exc.status, body=exc.body(), content_type="application/json", headers=exc.headers)
    if exc.close_connection:
        response.force_close()
    return response


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
    code = status_code_name(exc.status)
    if exc.status < 500:
        return InvalidRequest(exc.reason or "Invalid request.", status=exc.status, code=code)
    return GatewayError(exc.reason or "The gateway failed.", status=exc.status, code=code)
