"""HTTP/1.1 as the gateway's server speaks it: aiohttp's protocol, with the gateway's answers where
aiohttp would answer on its own.

- A request aiohttp's parser refuses (an oversized or malformed header, a NUL, a bad request line,
  broken chunked framing, a duplicate Content-Length) gets the OpenAI envelope, 400 `invalid_http`,
  with a fixed message naming the class of problem: never the parser's message, which quotes the
  offending bytes (an `Authorization` line, say). Framing that breaks after the handler has begun
  reading the body fails that read the same way.
- A request whose headers are not whole `server.header_timeout_s` after their first byte gets 408
  `request_timeout` and its connection is closed (slowloris). An idle keep-alive connection, with
  no byte of a next request, is left to aiohttp's keep-alive timeout.
- A response that closes the connection after the request body failed (past
  `server.body_timeout_s`, see `gateway.http.middleware`, or broken) closes it at once, instead of
  lingering on the stalled client for aiohttp's `lingering_time`.
- What aiohttp logs about an exception is its type and frames, never its message (which may
  quote a header).

`GatewayApplication` makes every server that runs it (`gateway serve`'s `web.run_app`, the tests'
`TestServer`) use this protocol: aiohttp builds the protocol factory from the application.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import warnings
from dataclasses import dataclass
from typing import Any, cast

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger
from aiohttp.http import RawRequestMessage
from aiohttp.http_exceptions import (
    BadHttpMethod,
    BadStatusLine,
    ContentEncodingError,
    HttpProcessingError,
    InvalidHeader,
    InvalidURLError,
    LineTooLong,
)
from aiohttp.web_log import AccessLogger
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest
from aiohttp.web_response import StreamResponse

from gateway.api.errors import GatewayError, InvalidRequest, RequestTimeout, status_code_name
from gateway.config.settings import ServerConfig
from gateway.http.request_headers import exception_summary

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class HttpTimeouts:
    header_s: float  # from a request's first byte to the end of its headers
    body_s: float  # from the end of the headers to the end of the body


HTTP_TIMEOUTS = web.AppKey("http_timeouts", HttpTimeouts)


class MalformedHttp(InvalidRequest):
    code = "invalid_http"
    close_connection = True


class MalformedBody(MalformedHttp):
    def __init__(self) -> None:
        super().__init__(
            "The request body could not be read: its chunked framing, Content-Length or Content-Encoding is invalid."
        )


_REQUEST_LINE = "The request line is malformed."
_HEADERS = "A request header is malformed."
_FRAMING = "The request body's framing (Content-Length or chunked encoding) is invalid."


def malformed_http(exc: BaseException | None) -> MalformedHttp:
    """A fixed message for each class of parser error, and the header at fault where the class says
    which: the parser's own message quotes the offending bytes."""
    param = None
    if isinstance(exc, LineTooLong):
        message = "The request line or a request header is longer than this server accepts."
    elif isinstance(exc, BadHttpMethod):
        message = "The request method is not a valid HTTP method."
    elif isinstance(exc, (BadStatusLine, InvalidURLError)):
        message = _REQUEST_LINE
    elif isinstance(exc, InvalidHeader):
        message = _HEADERS
    elif isinstance(exc, ContentEncodingError):
        message = "The request body's Content-Encoding is not one this server decodes (gzip and deflate are)."
        param = "Content-Encoding"
    else:
        message, param = _by_reason(exc.message if isinstance(exc, HttpProcessingError) else "")
    return MalformedHttp(message, param=param)


def _by_reason(parser_message: str) -> tuple[str, str | None]:
    # The parser's reason comes before the colon; only keywords of it pick one of the fixed messages.
    reason = parser_message.partition(":")[0].lower()
    for word, header in (("content-length", "Content-Length"), ("transfer-encoding", "Transfer-Encoding")):
        if word in reason:
            return _FRAMING, header
    if any(word in reason for word in ("chunk", "body", "data after")):
        return _FRAMING, None
    if "header" in reason:
        return _HEADERS, None
    if any(word in reason for word in ("url", "path", "query", "method", "version")):
        return _REQUEST_LINE, None
    return "The request is not valid HTTP/1.1.", None


def _envelope_for(page: web.HTTPException) -> web.Response:
    """The envelope for an aiohttp page raised outside the app's middleware (its text may quote a
    header: 'Unknown Expect: …'); a fixed message, a code, and `param` where a header is at fault."""
    status, code = page.status, status_code_name(page.status)
    if status == 417:
        error: GatewayError = InvalidRequest(
            "The Expect header asks for what this server does not do: only 100-continue is supported.",
            status=status,
            param="Expect",
            code=code,
        )
    elif status < 500:
        error = InvalidRequest(f"{page.reason}.", status=status, code=code)
    else:
        error = GatewayError("The gateway failed unexpectedly.", status=status)
    allowed = page.headers.get("Allow")
    headers = {"Allow": allowed} if allowed else None
    response = web.Response(status=status, body=error.body(), content_type="application/json", headers=headers)
    if not page.keep_alive:
        response.force_close()
    return response


with warnings.catch_warnings():
    # aiohttp discourages subclasses that add state; this one only picks the server's protocol.
    warnings.simplefilter("ignore", DeprecationWarning)

    class GatewayApplication(web.Application):
        def __init__(self, server: ServerConfig, timeouts: HttpTimeouts | None = None, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self[HTTP_TIMEOUTS] = timeouts or HttpTimeouts(server.header_timeout_s, server.body_timeout_s)

        def _make_handler(
            self,
            *,
            loop: asyncio.AbstractEventLoop | None = None,
            access_log_class: type[AbstractAccessLogger] = AccessLogger,
            **kwargs: Any,
        ) -> web.Server:
            server = super()._make_handler(loop=loop, access_log_class=access_log_class, **kwargs)
            return GatewayServer.adopt(server, self[HTTP_TIMEOUTS])


class GatewayServer(web.Server):
    """aiohttp's server (the protocol factory), making `GatewayRequestHandler`s."""

    timeouts: HttpTimeouts

    @classmethod
    def adopt(cls, server: web.Server, timeouts: HttpTimeouts) -> GatewayServer:
        server.__class__ = cls  # the same object and state; only the protocol it makes changes
        adopted = cast(GatewayServer, server)
        adopted.timeouts = timeouts
        return adopted

    def __call__(self) -> RequestHandler:
        return GatewayRequestHandler(self, self.timeouts, loop=self._loop, **self._kwargs)


class GatewayRequestHandler(RequestHandler):
    __slots__ = ("_header_timer", "_last_payload", "_timeouts")

    def __init__(self, manager: web.Server, timeouts: HttpTimeouts, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._timeouts = timeouts
        self._header_timer: asyncio.TimerHandle | None = None
        self._last_payload: Any = None  # the body of the last request parsed (a StreamReader)

    # -- headers that do not finish, framing that breaks mid-body -------------------------------

    def data_received(self, data: bytes) -> None:
        payload = self._last_payload
        in_body = payload is not None and not payload.is_eof()  # these bytes go (at least first) to that body
        parsed = self._request_count
        super().data_received(data)
        if self._request_count != parsed:  # a whole request's headers (or a parse error) arrived
            if self._header_timer is not None:
                self._cancel_header_timer()
            message, self._last_payload = self._messages[-1] if self._messages else (None, None)
            if in_body and not payload.is_eof() and not isinstance(message, RawRequestMessage):
                self._body_broke(payload)
        elif data and not in_body and self._header_timer is None:
            self._header_timer = self._loop.call_later(self._timeouts.header_s, self._headers_overdue)

    def _body_broke(self, payload: Any) -> None:
        """aiohttp queued a parse error and dropped the body being received: fail its reader now
        (the handler answers 400 and closes), or, its answer already sent, close the connection."""
        if self._request_in_progress or any(queued is payload for _, queued in self._messages):
            payload.set_exception(MalformedBody())
        else:  # lingering on the body of an answered request: nothing more will be said here
            self.force_close()

    def _headers_overdue(self) -> None:
        self._header_timer = None
        if self.transport is None or self._force_close:
            return
        waiting = self._waiter is not None and not self._waiter.done() and not self._messages
        if not waiting:  # a request is being answered: look again later
            self._header_timer = self._loop.call_later(self._timeouts.header_s, self._headers_overdue)
            return
        log.info("closed a connection from %s: its headers took over %gs", self.peername, self._timeouts.header_s)
        error = RequestTimeout(
            f"The request headers did not arrive within {self._timeouts.header_s:g} seconds (server.header_timeout_s)."
        )
        body = error.body()
        head = (
            f"HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n"
        )
        self.transport.write(head.encode() + body)
        self.force_close()

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def connection_lost(self, exc: BaseException | None) -> None:
        self._cancel_header_timer()
        self._last_payload = None
        super().connection_lost(exc)

    # -- responses -------------------------------------------------------------------------------

    async def finish_response(
        self, request: BaseRequest, resp: StreamResponse, start_time: float | None
    ) -> tuple[StreamResponse, bool]:
        if isinstance(resp, web.HTTPException):  # aiohttp's own page, raised before the middleware ran
            resp = _envelope_for(resp)
        finished = await super().finish_response(request, resp, start_time)
        if not resp.keep_alive and request.content.exception() is not None:
            # The body failed (past its deadline, broken framing or encoding) and we said close:
            # close now, instead of lingering on a stalled or broken body.
            self.force_close()
        return finished

    def handle_error(
        self, request: BaseRequest, status: int = 500, exc: BaseException | None = None, message: str | None = None
    ) -> StreamResponse:
        """aiohttp's own error answers: a parse error (400) or an exception the app let through."""
        if status == 400:
            error: GatewayError = malformed_http(exc)
            log.info("refused a malformed HTTP request from %s: %s", request.remote, error.message)
        else:
            error = GatewayError("The gateway failed unexpectedly.", status=status)
            if exc is not None:
                log.error("error handling a request from %s:\n%s", request.remote, exception_summary(exc))
        if request.writer.output_size > 0:  # as aiohttp: a response has begun, none other can follow
            raise ConnectionError("Response is sent already, cannot send another response with the error message")
        response = web.Response(status=error.status, body=error.body(), content_type="application/json")
        response.force_close()
        return response

    def log_exception(self, *args: Any, **kwargs: Any) -> None:
        exc_info = kwargs.get("exc_info")
        exc = exc_info if isinstance(exc_info, BaseException) else sys.exc_info()[1]
        text = (args[0] % args[1:] if len(args) > 1 else str(args[0])) if args else "error"
        if exc is not None:
            text = f"{text}\n{exception_summary(exc)}"
        self.logger.error("%s", text)
