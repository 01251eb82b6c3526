"""Azure OpenAI: the OpenAI Completions, Chat Completions and Embeddings APIs at Azure's address, reusing
the OpenAI-compatible provider with Azure's URLs (`{endpoint}/openai/deployments/{azure_deployment}/completions`,
`…/chat/completions` and `…/embeddings`, with `?api-version=…`) and its `api-key` header. Answers are relayed byte
for byte, as they are from OpenAI; the stream's `prompt_filter_results` frame is dropped (see openai_compat).
With `responses: native`, `/v1/responses` goes to Azure's own Responses API (`{endpoint}/openai/v1/responses`,
the model deployment named in the body), as it does to OpenAI's (`providers.native.openai_responses`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any
from urllib.parse import quote, urlencode

from pydantic import Field

from providers.base import (
    Api,
    CompletionResult,
    CompletionStream,
    Provider,
    UpstreamRequest,
    apis_of,
    native_apis_of,
)
from providers.native.openai_responses import ResponsesProvider
from providers.openai_compat import OpenAICompatibleOptions, OpenAICompatibleProvider, ResponsesMode
from providers.options import CredentialOptions, HttpUrl


class AzureOpenAIOptions(CredentialOptions):
    endpoint: HttpUrl  # https://<resource>.openai.azure.com
    azure_deployment: Annotated[str, Field(min_length=1, pattern=r"^[^/?#\s]+$")]  # the model deployment's name
    # The api-version query parameter Azure OpenAI requires.
    api_version: Annotated[str, Field(min_length=1)] = "2024-10-21"
    # How /v1/responses reaches this deployment: bridged onto its chat API, or native (Azure's /openai/v1/responses).
    responses: ResponsesMode = "bridged"


def azure_url(options: AzureOpenAIOptions, path: str = "completions") -> str:
    """`path`: "completions", "chat/completions" or "embeddings"."""
    deployment = quote(options.azure_deployment, safe="")
    query = urlencode({"api-version": options.api_version})
    return f"{options.endpoint.rstrip('/')}/openai/deployments/{deployment}/{path}?{query}"


def create(deployment: str, options: AzureOpenAIOptions, credential: str | None) -> Provider:
    compatible = OpenAICompatibleOptions(
        base_url=options.endpoint,
        headers=options.headers,
        max_connections=options.max_connections,
        max_response_bytes=options.max_response_bytes,
        max_event_bytes=options.max_event_bytes,
    )
    auth = {"api-key": credential} if credential else {}
    addresses: dict[str, Any] = {
        "url": azure_url(options),
        "chat_url": azure_url(options, "chat/completions"),
        "embeddings_url": azure_url(options, "embeddings"),
        "auth_headers": auth,
    }
    provider: Provider
    if options.responses == "native":  # the v1 API: no api-version, the model deployment named in the body
        responses_url = f"{options.endpoint.rstrip('/')}/openai/v1/responses"
        provider = ResponsesProvider(
            deployment,
            compatible,
            credential,
            responses_url=responses_url,
            responses_model=options.azure_deployment,
            **addresses,
        )
    else:
        provider = OpenAICompatibleProvider(deployment, compatible, credential, **addresses)
    if options.drop_params:
        return DroppingProvider(provider, frozenset(options.drop_params))
    return provider


class DroppingProvider:
    """Removes the parameters a deployment agreed to drop, then delegates."""

    def __init__(self, inner: Provider, names: frozenset[str]) -> None:
        self._inner = inner
        self._names = names
        self.apis: frozenset[Api] = apis_of(inner)
        self.native_apis: frozenset[str] = native_apis_of(inner)

    async def complete(self, request: UpstreamRequest) -> CompletionResult:
        return await self._inner.complete(self._without(request))

    async def stream(self, request: UpstreamRequest) -> CompletionStream:
        return await self._inner.stream(self._without(request))

    async def aclose(self) -> None:
        await self._inner.aclose()

    def _without(self, request: UpstreamRequest) -> UpstreamRequest:
        return replace(request, body={name: value for name, value in request.body.items() if name not in self._names})
