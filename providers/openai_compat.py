"""Any OpenAI-compatible upstream: OpenAI, vLLM, llama.cpp, Ollama, TGI, …, for both client APIs:
`/completions` and `/chat/completions` (chosen by `UpstreamRequest.api`).

One pooled keep-alive `aiohttp.ClientSession` per deployment; request bodies are sent as
given (unknown fields included) and JSON answers relayed byte for byte (tool_calls, logprobs,
refusal as they came). A stream frame that is neither a chunk nor an error (Azure's
`prompt_filter_results` frame, with an empty `object` and no choices) is dropped, never relayed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Annotated, Any

import aiohttp
import orjson
from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from providers.base import APIS, Api, CompletionResult, UpstreamRequest
from providers.options import DEFAULT_MAX_RESPONSE_BYTES, ByteLimit
from providers.translated.adapter import answer_error, stream_error_event
from providers.upstream.client import (
    answer_failure,
    event_too_large,
    json_object,
    mid_stream_error,
    new_session,
    not_an_event_stream,
    post,
    read_body,
    release,
    stream_timeout,
    transport_error,
    truncated_stream,
    whole_answer_timeout,
)
from providers.upstream.scrubbing import Secrets, credential_headers
from providers.upstream.sse import DEFAULT_MAX_EVENT_BYTES, EventTooLarge, SSEDecoder

_MAX_SLICE_BYTES = 8192


class OpenAICompatibleOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: Annotated[str, Field(pattern=r"^https?://[^\s/]+")]
    model: str | None = None  # the upstream's model name; unset: the client's `model` as sent
    api_key: SecretStr | None = None
    virtual_key: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    max_connections: Annotated[int, Field(ge=0)] = 0  # 0: no limit on the pool
    max_response_bytes: ByteLimit = DEFAULT_MAX_RESPONSE_BYTES  # a whole (non-streamed) answer, decompressed
    max_event_bytes: ByteLimit = DEFAULT_MAX_EVENT_BYTES  # one line or event of a stream, decompressed

    @model_validator(mode="after")
    def _one_credential(self) -> OpenAICompatibleOptions:
        if self.api_key is not None and self.virtual_key is not None:
            raise ValueError("give either 'api_key' or 'virtual_key', not both")
        return self


class OpenAICompatibleProvider:
    """`url`, `chat_url` and `auth_headers` let APIs of the same shape at another address (Azure
    OpenAI) reuse it; by default `{base_url}/completions` and `{base_url}/chat/completions` with
    `Authorization: Bearer <credential>`."""

    apis: frozenset[Api] = APIS

    def __init__(
        self,
        deployment: str,
        options: OpenAICompatibleOptions,
        credential: str | None,
        *,
        url: str | None = None,
        chat_url: str | None = None,
        auth_headers: Mapping[str, str] | None = None,
    ) -> None:
        self._deployment = deployment
        self._url = url or options.base_url.rstrip("/") + "/completions"
        self._chat_url = chat_url or options.base_url.rstrip("/") + "/chat/completions"
        self._base_url = options.base_url  # named in transport errors (without credentials or query)
        self._model = options.model
        self._secrets = Secrets(credential, *credential_headers(options.headers))
        if auth_headers is None:
            auth_headers = {"Authorization": f"Bearer {credential}"} if credential else {}
        self._headers = {"Content-Type": "application/json", **options.headers, **auth_headers}
        self._session = new_session(options.max_connections)
        self._max_response_bytes = options.max_response_bytes
        self._max_event_bytes = options.max_event_bytes

    async def complete(self, request: UpstreamRequest) -> CompletionResult:
        try:
            async with self._post(request, whole_answer_timeout(request.timeout_s)) as response:
                if response.status >= 300:
                    raise await answer_failure(response, self._deployment, self._secrets)
                raw = await read_body(response, self._deployment, self._max_response_bytes)
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise transport_error(exc, self._deployment, request.timeout_s, self._base_url) from None
        return CompletionResult(raw=raw, body=json_object(raw, self._deployment, "answered with a body"))

    async def stream(self, request: UpstreamRequest) -> _UpstreamSSE:
        try:
            response = await self._post(request, stream_timeout(request.timeout_s))
            if response.status >= 300:
                try:
                    raise await answer_failure(response, self._deployment, self._secrets)
                finally:
                    response.release()
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise transport_error(exc, self._deployment, request.timeout_s, self._base_url) from None
        if not response.content_type.startswith("text/event-stream"):
            response.close()
            raise not_an_event_stream(self._deployment, response.content_type, self._secrets)
        return _UpstreamSSE(
            response, self._deployment, request.timeout_s, self._base_url, self._secrets, self._max_event_bytes
        )

    async def aclose(self) -> None:
        await self._session.close()

    def _post(self, request: UpstreamRequest, timeout: aiohttp.ClientTimeout) -> aiohttp.client._RequestContextManager:
        body = request.body
        if self._model is not None and body.get("model") != self._model:
            body = {**body, "model": self._model}
        headers = {**self._headers, "x-request-id": request.request_id}
        url = self._url if request.api == "completions" else self._chat_url
        return post(self._session, url, orjson.dumps(body), headers, timeout)


class _UpstreamSSE:
    """The SSE events of one upstream response, validated as JSON objects as they arrive. An error
    event (`{"error": …}`, as vLLM and OpenAI send one mid-stream) ends it with a scrubbed 502
    `upstream_stream_error`, never relayed as it came."""

    def __init__(
        self,
        response: aiohttp.ClientResponse,
        deployment: str,
        timeout_s: float,
        base_url: str,
        secrets: Secrets,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    ) -> None:
        self._response = response
        self._max_event_bytes = max_event_bytes
        self._deployment = deployment
        self._timeout_s = timeout_s
        self._base_url = base_url
        self._secrets = secrets
        self._finished = False

    async def __aiter__(self) -> AsyncIterator[list[bytes]]:
        decoder = SSEDecoder(self._max_event_bytes)
        try:
            async for read in self._response.content.iter_any():
                # A fast upstream can fill the buffer with hundreds of events: relay them in slices
                # so the first ones leave before the rest are parsed (TTFB flat in stream length).
                for start in range(0, len(read), _MAX_SLICE_BYTES):
                    payloads = decoder.feed(read[start : start + _MAX_SLICE_BYTES])
                    foreign = False
                    for payload in payloads:
                        foreign |= not self._check_event(payload)
                    if foreign:  # rare: only Azure's prompt_filter_results frame so far
                        payloads = [payload for payload in payloads if _is_chunk(orjson.loads(payload))]
                    if payloads:
                        yield payloads
                    if decoder.done:
                        self._finished = True
                        return
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise mid_stream_error(exc, self._deployment, self._timeout_s, self._base_url) from None
        except EventTooLarge as exc:
            raise event_too_large(self._deployment, exc.limit) from None
        raise truncated_stream(self._deployment)

    async def aclose(self) -> None:
        await release(self._response, self._finished)

    def _check_event(self, payload: bytes) -> bool:
        """Raises on an error event; False for a frame that is no chunk (to be dropped)."""
        event = json_object(payload, self._deployment, "sent a stream event")
        error = event.get("error")
        if error:
            fields = error if isinstance(error, dict) else {"message": error}
            raise answer_error(stream_error_event(fields), self._deployment, self._secrets)
        return _is_chunk(event)


def _is_chunk(event: dict[str, Any]) -> bool:
    """Not Azure's first frame of a stream, `{"choices":[],"created":0,"id":"","model":"","object":"",
    "prompt_filter_results":[…]}`: strict clients reject a chunk with an empty `object`."""
    return bool(event.get("object") or event.get("choices") or event.get("usage"))
