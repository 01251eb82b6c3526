"""What every HTTP provider shares: its pool, timeouts, transport-error mapping, JSON checks, and
how an upstream stream's connection is given back (reused after a clean end, cut otherwise)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import aiohttp
import orjson

from gateway.errors import GatewayError, UpstreamError, UpstreamTimeout

log = logging.getLogger(__name__)

_DRAIN_TIMEOUT_S = 1.0


def new_session(max_connections: int) -> aiohttp.ClientSession:
    """One pooled keep-alive session per deployment (0: no limit on the pool)."""
    connector = aiohttp.TCPConnector(limit=max_connections, ttl_dns_cache=300)
    return aiohttp.ClientSession(connector=connector, auto_decompress=True)


def whole_answer_timeout(timeout_s: float) -> aiohttp.ClientTimeout:
    return aiohttp.ClientTimeout(total=timeout_s)


def stream_timeout(timeout_s: float) -> aiohttp.ClientTimeout:
    # sock_read bounds the wait for the first byte and every gap between chunks.
    return aiohttp.ClientTimeout(total=None, sock_connect=timeout_s, sock_read=timeout_s)


def transport_error(exc: BaseException, deployment: str, timeout_s: float) -> GatewayError:
    """A timeout or connection failure before the answer started."""
    if isinstance(exc, asyncio.TimeoutError):
        return UpstreamTimeout(f"The upstream of deployment '{deployment}' did not answer within {timeout_s:g} s.")
    log.warning("upstream of deployment %s failed: %s", deployment, type(exc).__name__)
    if isinstance(exc, aiohttp.ClientPayloadError):
        return UpstreamError(
            f"The upstream of deployment '{deployment}' cut its answer short.", code="upstream_truncated"
        )
    return UpstreamError(
        f"The upstream of deployment '{deployment}' could not be reached.", code="upstream_unreachable"
    )


def mid_stream_error(exc: BaseException, deployment: str, timeout_s: float) -> GatewayError:
    """A timeout or connection failure after the stream started."""
    if isinstance(exc, asyncio.TimeoutError):
        return UpstreamTimeout(f"The upstream of deployment '{deployment}' stalled mid-stream for {timeout_s:g} s.")
    return UpstreamError(
        f"The upstream of deployment '{deployment}' dropped the stream mid-answer.", code="upstream_unreachable"
    )


def truncated_stream(deployment: str, end: str = "[DONE]") -> UpstreamError:
    return UpstreamError(
        f"The upstream of deployment '{deployment}' ended the stream without {end}; the answer may be truncated.",
        code="upstream_truncated",
    )


def not_an_event_stream(deployment: str, content_type: str) -> UpstreamError:
    return UpstreamError(
        f"The upstream of deployment '{deployment}' did not answer with an event stream "
        f"(Content-Type {content_type!r}).",
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
    otherwise read what little is left (the chunked terminator) so the connection is reused."""
    if not finished:
        response.close()
        return
    if response.content.at_eof():
        response.release()
        return
    try:
        async with asyncio.timeout(_DRAIN_TIMEOUT_S):  # no extra Task, unlike wait_for
            await response.content.read()
    except (TimeoutError, aiohttp.ClientError):
        response.close()
        return
    response.release()
