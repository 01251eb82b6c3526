"""Any OpenAI-compatible upstream: OpenAI, vLLM, llama.cpp, Ollama, TGI, TEI, …, for every client API:
`/completions`, `/chat/completions` and `/embeddings` (chosen by `UpstreamRequest.api`).

One pooled keep-alive `aiohttp.ClientSession` per deployment; request bodies are sent as
given (unknown fields included) and JSON answers relayed byte for byte (tool_calls, logprobs,
refusal as they came). A stream frame that is neither a chunk nor an error (Azure's
`prompt_filter_results` frame, with an empty `object` and no choices) is dropped, never relayed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Literal

import aiohttp
import orjson
from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from providers.base import APIS, Api, CompletionResult, UpstreamRequest
from providers.options import DEFAULT_MAX_RESPONSE_BYTES, ByteLimit
from providers.translated.relay import ParsedRelayStream, RelayStream
from providers.upstream.client import (
    answer_failure,
    json_object,
    new_session,
    not_an_event_stream,
    post,
    read_body,
    stream_timeout,
    transport_error,
    whole_answer_timeout,
)
from providers.upstream.scrubbing import Secrets, credential_headers
from providers.upstream.sse import DEFAULT_MAX_EVENT_BYTES

# `/v1/responses` on a deployment: bridged onto chat (every deployment), or sent to the upstream's
# own `/responses` as it came (an upstream that serves the Responses API: OpenAI, Azure OpenAI).
ResponsesMode = Literal["bridged", "native"]


class OpenAICompatibleOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # The server's OpenAI-compatible API root, e.g. https://api.openai.com/v1 or http://vllm:8000/v1.
    base_url: Annotated[str, Field(pattern=r"^https?://[^\s/]+")]
    model: str | None = None  # the upstream's model name; unset: the client's `model` as sent
    # The upstream's credential, as an environment reference.
    api_key: SecretStr | None = None
    # Instead of api_key: the name of a virtual key holding the credential.
    virtual_key: str | None = None
    # Extra headers sent upstream with every call.
    headers: dict[str, str] = Field(default_factory=dict)
    max_connections: Annotated[int, Field(ge=0)] = 0  # 0: no limit on the pool
    max_response_bytes: ByteLimit = DEFAULT_MAX_RESPONSE_BYTES  # a whole (non-streamed) answer, decompressed
    max_event_bytes: ByteLimit = DEFAULT_MAX_EVENT_BYTES  # one line or event of a stream, decompressed
    # How /v1/responses reaches this upstream: bridged onto its chat API, or native (its own Responses API).
    responses: ResponsesMode = "bridged"

    @model_validator(mode="after")
    def _one_credential(self) -> OpenAICompatibleOptions:
        if self.api_key is not None and self.virtual_key is not None:
            raise ValueError("give either 'api_key' or 'virtual_key', not both")
        return self


class OpenAICompatibleProvider:
    """`url`, `chat_url`, `embeddings_url` and `auth_headers` let APIs of the same shape at another
    address (Azure OpenAI) reuse it; by default `{base_url}/completions`, `{base_url}/chat/completions`
    and `{base_url}/embeddings` with `Authorization: Bearer <credential>`."""

    apis: frozenset[Api] = APIS

    def __init__(
        self,
        deployment: str,
        options: OpenAICompatibleOptions,
        credential: str | None,
        *,
        url: str | None = None,
        chat_url: str | None = None,
        embeddings_url: str | None = None,
        auth_headers: Mapping[str, str] | None = None,
    ) -> None:
        self._deployment = deployment
        self._url = url or options.base_url.rstrip("/") + "/completions"
        self._chat_url = chat_url or options.base_url.rstrip("/") + "/chat/completions"
        self._embeddings_url = embeddings_url or options.base_url.rstrip("/") + "/embeddings"
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

    async def stream(self, request: UpstreamRequest) -> RelayStream:
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
        relay = ParsedRelayStream if request.parsed else RelayStream
        return relay(
            response, self._deployment, self._secrets, request.timeout_s, self._base_url, self._max_event_bytes
        )

    async def aclose(self) -> None:
        await self._session.close()

    def _post(self, request: UpstreamRequest, timeout: aiohttp.ClientTimeout) -> aiohttp.client._RequestContextManager:
        body = request.body
        if self._model is not None and body.get("model") != self._model:
            body = {**body, "model": self._model}
        headers = {**self._headers, "x-request-id": request.request_id}
        if request.api == "completions":
            url = self._url
        else:
            url = self._chat_url if request.api == "chat" else self._embeddings_url
        return post(self._session, url, orjson.dumps(body), headers, timeout)
