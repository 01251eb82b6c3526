"""Any OpenAI-compatible `/completions` upstream: OpenAI, vLLM, llama.cpp, Ollama, TGI, …

One pooled keep-alive `aiohttp.ClientSession` per deployment; request bodies are sent as
given (unknown fields included) and JSON answers relayed byte for byte.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Annotated, Any

import aiohttp
import orjson
from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from gateway.errors import GatewayError, UpstreamError, UpstreamTimeout
from providers.base import CompletionResult, UpstreamRequest
from providers.sse import SSEDecoder
from providers.upstream_errors import upstream_status_error

log = logging.getLogger(__name__)

_DRAIN_TIMEOUT_S = 1.0
_MAX_SLICE_BYTES = 8192


class OpenAICompatibleOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: Annotated[str, Field(pattern=r"^https?://[^\s/]+")]
    model: str | None = None  # the upstream's model name; unset: the client's `model` as sent
    api_key: SecretStr | None = None
    virtual_key: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    max_connections: Annotated[int, Field(ge=0)] = 0  # 0: no limit on the pool

    @model_validator(mode="after")
    def _one_credential(self) -> OpenAICompatibleOptions:
        if self.api_key is not None and self.virtual_key is not None:
            raise ValueError("give either 'api_key' or 'virtual_key', not both")
        return self


class OpenAICompatibleProvider:
    def __init__(self, deployment: str, options: OpenAICompatibleOptions, credential: str | None) -> None:
        self._deployment = deployment
        self._url = options.base_url.rstrip("/") + "/completions"
        self._model = options.model
        self._secrets = (credential or "",)
        self._headers = {"Content-Type": "application/json", **options.headers}
        if credential:
            self._headers["Authorization"] = f"Bearer {credential}"
        connector = aiohttp.TCPConnector(limit=options.max_connections, ttl_dns_cache=300)
        self._session = aiohttp.ClientSession(connector=connector, auto_decompress=True)

    async def complete(self, request: UpstreamRequest) -> CompletionResult:
        timeout = aiohttp.ClientTimeout(total=request.timeout_s)
        try:
            async with self._post(request, timeout) as response:
                raw = await response.read()
                if response.status >= 400:
                    raise self._status_error(response, raw)
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise self._transport_error(exc, request.timeout_s) from None
        return CompletionResult(raw=raw, body=_json_object(raw, self._deployment, "answered with a body"))

    async def stream(self, request: UpstreamRequest) -> _UpstreamSSE:
        # sock_read bounds the wait for the first byte and every gap between chunks.
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=request.timeout_s, sock_read=request.timeout_s)
        try:
            response = await self._post(request, timeout)
            if response.status >= 400:
                raw = await response.read()
                response.release()
                raise self._status_error(response, raw)
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise self._transport_error(exc, request.timeout_s) from None
        if not response.content_type.startswith("text/event-stream"):
            response.close()
            raise UpstreamError(
                f"The upstream of deployment '{self._deployment}' did not answer with an event stream "
                f"(Content-Type {response.content_type!r}).",
                code="upstream_malformed",
            )
        return _UpstreamSSE(response, self._deployment, request.timeout_s)

    async def aclose(self) -> None:
        await self._session.close()

    def _post(self, request: UpstreamRequest, timeout: aiohttp.ClientTimeout) -> aiohttp.client._RequestContextManager:
        body = request.body
        if self._model is not None and body.get("model") != self._model:
            body = {**body, "model": self._model}
        headers = {**self._headers, "x-request-id": request.request_id}
        return self._session.post(self._url, data=orjson.dumps(body), headers=headers, timeout=timeout)

    def _status_error(self, response: aiohttp.ClientResponse, raw: bytes) -> GatewayError:
        headers = {name.lower(): value for name, value in response.headers.items()}
        return upstream_status_error(response.status, raw, headers, deployment=self._deployment, secrets=self._secrets)

    def _transport_error(self, exc: BaseException, timeout_s: float) -> GatewayError:
        if isinstance(exc, asyncio.TimeoutError):
            return UpstreamTimeout(
                f"The upstream of deployment '{self._deployment}' did not answer within {timeout_s:g} s."
            )
        log.warning("upstream of deployment %s failed: %s", self._deployment, type(exc).__name__)
        if isinstance(exc, aiohttp.ClientPayloadError):
            return UpstreamError(
                f"The upstream of deployment '{self._deployment}' cut its answer short.", code="upstream_truncated"
            )
        return UpstreamError(
            f"The upstream of deployment '{self._deployment}' could not be reached.", code="upstream_unreachable"
        )


class _UpstreamSSE:
    """The SSE events of one upstream response, validated as JSON objects as they arrive."""

    def __init__(self, response: aiohttp.ClientResponse, deployment: str, timeout_s: float) -> None:
        self._response = response
        self._deployment = deployment
        self._timeout_s = timeout_s
        self._finished = False

    async def __aiter__(self) -> AsyncIterator[list[bytes]]:
        decoder = SSEDecoder()
        try:
            async for read in self._response.content.iter_any():
                # A fast upstream can fill the buffer with hundreds of events: relay them in slices
                # so the first ones leave before the rest are parsed (TTFB flat in stream length).
                for start in range(0, len(read), _MAX_SLICE_BYTES):
                    payloads = decoder.feed(read[start : start + _MAX_SLICE_BYTES])
                    for payload in payloads:
                        self._check_event(payload)
                    if payloads:
                        yield payloads
                    if decoder.done:
                        self._finished = True
                        return
        except TimeoutError:
            raise UpstreamTimeout(
                f"The upstream of deployment '{self._deployment}' stalled mid-stream for {self._timeout_s:g} s."
            ) from None
        except aiohttp.ClientError:
            raise UpstreamError(
                f"The upstream of deployment '{self._deployment}' dropped the stream mid-answer.",
                code="upstream_unreachable",
            ) from None
        raise UpstreamError(
            f"The upstream of deployment '{self._deployment}' ended the stream without [DONE]; "
            "the answer may be truncated.",
            code="upstream_truncated",
        )

    async def aclose(self) -> None:
        if not self._finished:
            self._response.close()  # client gone or stream failed: stop the upstream at once
            return
        # After [DONE] only the chunked terminator is left; read it so the connection is reused.
        if self._response.content.at_eof():
            self._response.release()
            return
        try:
            async with asyncio.timeout(_DRAIN_TIMEOUT_S):  # no extra Task, unlike wait_for
                await self._response.content.read()
        except (TimeoutError, aiohttp.ClientError):
            self._response.close()
            return
        self._response.release()

    def _check_event(self, payload: bytes) -> None:
        _json_object(payload, self._deployment, "sent a stream event")


def _json_object(raw: bytes, deployment: str, what: str) -> dict[str, Any]:
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise UpstreamError(
            f"The upstream of deployment '{deployment}' {what} that is not a JSON object.", code="upstream_malformed"
        )
    return value
