"""What every HTTP provider shares: its pool, the one way it calls out (`post`: redirects never
followed), timeouts, the mapping of failed answers and transport errors, JSON checks, and how an
upstream stream's connection is given back (reused after a clean end, cut otherwise).

A connection failure or timeout names the deployment and where its upstream is (`shown_url`: the
configured base URL without credentials, query or fragment), and what went wrong in a few words.

Nothing an upstream sends is held unbounded: a whole answer is read in pieces as they arrive
(decompressed a bounded step at a time by aiohttp) and given up with a 502 as soon as it passes the
deployment's `max_response_bytes`; an error body is read up to `_ERROR_BODY_BYTES` only.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import logging
import ssl
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp
import orjson

from gateway.api.errors import GatewayError, UpstreamError, UpstreamTimeout
from gateway.api.trace_context import with_trace_headers
from providers.upstream.errors import SecretsLike, scrub, upstream_redirect, upstream_status_error
from providers.upstream.scrubbing import NO_SECRETS, Secrets, cut

log = logging.getLogger(__name__)

_DRAIN_TIMEOUT_S = 1.0
_DRAIN_BYTES = 64 * 1024  # read after a stream's end to reuse its connection; more: it is closed
_ERROR_BODY_BYTES = 1024 * 1024  # of a failed answer: more than any error message, cut beyond


def new_session(max_connections: int) -> aiohttp.ClientSession:
    """One pooled keep-alive session per deployment (0: no limit on the pool)."""
    connector = aiohttp.TCPConnector(limit=max_connections, ttl_dns_cache=300)
    return aiohttp.ClientSession(connector=connector, auto_decompress=True)


def post(
    session: aiohttp.ClientSession, url: str, body: bytes, headers: dict[str, str], timeout: aiohttp.ClientTimeout
) -> aiohttp.client._RequestContextManager:
    """Every upstream call goes out here, and never follows a redirect: the credential headers
    (`Authorization`, `api-key`, `x-api-key`, `x-goog-api-key`) would go with it, to whatever origin
    the upstream names. A 3xx comes back as it is, and `answer_failure` makes it a 502.
    A traced attempt's `traceparent` (and `tracestate`) go with it (`gateway.api.trace_context`)."""
    headers = with_trace_headers(headers)
    return session.post(url, data=body, headers=headers, timeout=timeout, allow_redirects=False)


async def answer_failure(
    response: aiohttp.ClientResponse,
    deployment: str,
    secrets: SecretsLike,
    rewrite: Callable[[bytes], bytes] | None = None,
) -> GatewayError:
    """The error for an answer with a status of 300 or more: a redirect (not followed, its body
    unread and its connection closed), or an error whose body is read and scrubbed. `rewrite`: the
    API's error body as OpenAI's envelope."""
    if response.status < 400:
        response.close()
        location = response.headers.get("Location")
        return upstream_redirect(response.status, location, str(response.url), deployment=deployment, secrets=secrets)
    raw = await read_at_most(response, _ERROR_BODY_BYTES)
    headers = {name.lower(): value for name, value in response.headers.items()}
    body = rewrite(raw) if rewrite is not None else raw
    return upstream_status_error(response.status, body, headers, deployment=deployment, secrets=secrets)


async def read_body(response: aiohttp.ClientResponse, deployment: str, limit: int) -> bytes:
    """A whole answer, decompressed, read piece by piece: more than `limit` bytes is a 502
    `upstream_response_too_large` (its connection closed) as soon as the excess arrives, or before
    reading at all when an uncompressed body's Content-Length already says so."""
    declared = response.content_length
    if declared is not None and not response.headers.get("Content-Encoding"):
        if declared > limit:
            response.close()
            raise response_too_large(deployment, limit)
        return await response.read()  # exactly `declared` bytes: aiohttp reads no further
    pieces: list[bytes] = []
    size = 0
    async for piece in response.content.iter_any():
        size += len(piece)
        if size > limit:
            pieces.clear()
            response.close()
            raise response_too_large(deployment, limit)
        pieces.append(piece)
    return b"".join(pieces)


async def read_at_most(response: aiohttp.ClientResponse, limit: int) -> bytes:
    """Up to `limit` bytes of a body (decompressed); the rest is never read: the connection closes."""
    pieces: list[bytes] = []
    size = 0
    async for piece in response.content.iter_any():
        pieces.append(piece)
        size += len(piece)
        if size >= limit:
            response.close()
            break
    return b"".join(pieces)[:limit]


def byte_size(count: int) -> str:
    """`4 MiB (4194304 bytes)`, or `1500 bytes`: a limit as a message names it."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size and count % size == 0:
            return f"{count // size} {unit} ({count} bytes)"
    return f"{count} bytes"


def response_too_large(deployment: str, limit: int) -> UpstreamError:
    log.warning("upstream of deployment %s answered with more than %d bytes", deployment, limit)
    return UpstreamError(
        f"The upstream of deployment '{deployment}' answered with a body larger than the deployment's limit "
        f"of {byte_size(limit)} after decompression (provider.max_response_bytes).",
        code="upstream_response_too_large",
    )


def event_too_large(deployment: str, limit: int) -> UpstreamError:
    log.warning("upstream of deployment %s sent a stream line or event of more than %d bytes", deployment, limit)
    return UpstreamError(
        f"The upstream of deployment '{deployment}' sent a stream line or event larger than the deployment's limit "
        f"of {byte_size(limit)} after decompression (provider.max_event_bytes).",
        code="upstream_event_too_large",
    )


# Timeouts are immutable and nearly always the deployment's `timeout_s`: made once, not per request.
@functools.lru_cache(maxsize=64)
def whole_answer_timeout(timeout_s: float) -> aiohttp.ClientTimeout:
    return aiohttp.ClientTimeout(total=timeout_s)


@functools.lru_cache(maxsize=64)
def stream_timeout(timeout_s: float) -> aiohttp.ClientTimeout:
    # sock_read bounds the wait for the first byte and every gap between chunks.
    return aiohttp.ClientTimeout(total=None, sock_connect=timeout_s, sock_read=timeout_s)


def shown_url(url: str) -> str:
    """A URL as it may appear in a message or a log: scheme://host[:port]/path, with no userinfo
    (`user:password@`), query string or fragment, where credentials could hide, and anything in
    the path shaped like an API key, or holding a known credential, redacted."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "(an unparsable URL)"
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = host if port is None else f"{host}:{port}"
    return urlunsplit((parts.scheme, netloc, scrub(parts.path.rstrip("/"), NO_SECRETS), "", ""))


def transport_error(exc: BaseException, deployment: str, timeout_s: float, url: str) -> GatewayError:
    """A timeout or connection failure before the answer started. `url`: the deployment's base URL
    (shown without credentials)."""
    where = f"The upstream of deployment '{deployment}' at {shown_url(url)}"
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return UpstreamTimeout(f"{where} did not accept a connection within {timeout_s:g} s.")
    if isinstance(exc, asyncio.TimeoutError):
        return UpstreamTimeout(f"{where} did not answer within {timeout_s:g} s.")
    cause = _cause(exc)
    log.warning(
        "upstream of deployment %s at %s failed: %s (%s)", deployment, shown_url(url), type(exc).__name__, cause
    )
    if isinstance(exc, aiohttp.ClientPayloadError):
        return UpstreamError(f"{where} cut its answer short.", code="upstream_truncated")
    return UpstreamError(f"{where} could not be reached ({cause}).", code="upstream_unreachable")


def mid_stream_error(exc: BaseException, deployment: str, timeout_s: float, url: str) -> GatewayError:
    """A timeout or connection failure after the stream started."""
    where = f"The upstream of deployment '{deployment}' at {shown_url(url)}"
    if isinstance(exc, asyncio.TimeoutError):
        return UpstreamTimeout(f"{where} stalled mid-stream for {timeout_s:g} s.")
    return UpstreamError(f"{where} dropped the stream mid-answer ({_cause(exc)}).", code="upstream_unreachable")


_ERRNO_WORDS = {
    errno.ECONNREFUSED: "connection refused",
    errno.ECONNRESET: "connection reset",
    errno.EHOSTUNREACH: "host unreachable",
    errno.ENETUNREACH: "network unreachable",
    errno.ETIMEDOUT: "connection timed out",
}


def _cause(exc: BaseException) -> str:
    """What went wrong, in a few words from a fixed set: never a URL, a header or the OS's own text."""
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return "TLS certificate not trusted"
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return "host name not found"
    if isinstance(exc, aiohttp.ClientSSLError) or isinstance(exc.__cause__, ssl.SSLError):
        return "TLS handshake failed"
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return "the server closed the connection"
    if isinstance(exc, aiohttp.ClientConnectorError | aiohttp.ClientOSError):
        number = exc.errno if exc.errno is not None else getattr(exc.__cause__, "errno", None)
        if number in _ERRNO_WORDS:
            return _ERRNO_WORDS[number]
        return "connection failed"
    return type(exc).__name__


def truncated_stream(deployment: str, end: str = "[DONE]") -> UpstreamError:
    return UpstreamError(
        f"The upstream of deployment '{deployment}' ended the stream without {end}; the answer may be truncated.",
        code="upstream_truncated",
    )


def not_an_event_stream(deployment: str, content_type: str, secrets: Secrets = NO_SECRETS) -> UpstreamError:
    shown = cut(secrets.scrub(content_type), 100)  # the upstream's own text
    return UpstreamError(
        f"The upstream of deployment '{deployment}' did not answer with an event stream (Content-Type {shown!r}).",
        code="upstream_malformed",
    )


def json_object(raw: bytes, deployment: str, what: str) -> dict[str, Any]:
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise UpstreamError(
            f"The upstream of deployment '{deployment}' {what} that is not a JSON object.", code="upstream_malformed"
        )
    return value


async def release(response: aiohttp.ClientResponse, finished: bool) -> None:
    """Give a stream's connection back: cut it at once if unfinished (client gone or stream failed),
    otherwise read what little is left (the chunked terminator) so the connection is reused; an
    upstream with more than `_DRAIN_BYTES` (or a second) left after its end is cut off too."""
    if not finished:
        response.close()
        return
    if response.content.at_eof():
        response.release()
        return
    drained = 0
    try:
        async with asyncio.timeout(_DRAIN_TIMEOUT_S):  # no extra Task, unlike wait_for
            while not response.content.at_eof():
                drained += len(await response.content.readany())
                if drained > _DRAIN_BYTES:  # not a terminator: whatever it is, it is not read
                    response.close()
                    return
    except (TimeoutError, aiohttp.ClientError):
        response.close()
        return
    response.release()
