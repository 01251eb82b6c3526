"""A provider for any API whose shapes an `Adapter` translates: the HTTP side, the same for all.

A Completions request becomes the adapter's planned calls (one per prompt, or per prompt and
sample), made concurrently on the deployment's one pooled session; their answers are merged into
one `text_completion` with choices indexed as OpenAI indexes them. A Chat Completions request
(`api="chat"`) is planned and merged the same way into one `chat.completion` (or relayed as it
came, when the upstream speaks that API already). An Embeddings request (`api="embeddings"`, on an
adapter that embeds) is planned the same way, its calls' vectors joined in input order into OpenAI's
answer, shortened and re-normalized to `dimensions` when asked. Failures map as they do for OpenAI-compatible
upstreams: 4xx pass through, 5xx / unreachable / malformed are 502, timeouts 504.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from itertools import accumulate
from typing import Any, TypeVar

import aiohttp
import orjson

from gateway.api.embeddings import inputs_of
from gateway.api.errors import GatewayError, InvalidRequest
from providers import embeddings
from providers.base import APIS, TEXT_APIS, Api, CompletionResult, UpstreamRequest
from providers.chat.shape import chat_body, chat_meta
from providers.completion_shape import ChunkMeta, Reply, completion_body
from providers.options import TranslatedOptions
from providers.translated.adapter import (
    SHAPE_ERRORS,
    Adapter,
    Embedded,
    EmbeddingAdapter,
    Plan,
    UpstreamCall,
    answer_error,
    as_answer_problem,
)
from providers.translated.relay import ParsedRelayStream, RelayStream
from providers.translated.stream import CallStream, TranslatedStream
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

T = TypeVar("T")


class TranslatedProvider:
    def __init__(self, deployment: str, adapter: Adapter, credential: str | None, options: TranslatedOptions) -> None:
        self._deployment = deployment
        self._adapter = adapter
        # Every adapter translates both text APIs; one whose API embeds (`embedded`) serves embeddings too.
        self.apis: frozenset[Api] = APIS if isinstance(adapter, EmbeddingAdapter) else TEXT_APIS
        self._secrets = Secrets(credential, *credential_headers(options.headers))
        self._max_fanout = options.max_fanout
        self._base_url = options.base_url  # named in transport errors (without credentials or query)
        self._session = new_session(options.max_connections)
        self._max_response_bytes = options.max_response_bytes
        self._max_event_bytes = options.max_event_bytes

    async def complete(self, request: UpstreamRequest) -> CompletionResult:
        if request.api == "embeddings":
            return await self._embed(request)
        plan = self._plan(request, stream=False)
        if plan.relay:
            raw, answer = await self._answer(plan.calls[0], request)
            return CompletionResult(raw=raw, body=answer)
        replies = await run_all([self._call(call, request) for call in plan.calls])
        merge = chat_body if request.api == "chat" else completion_body
        body = merge(replies, _bases(plan.calls), plan.model)
        return CompletionResult(raw=orjson.dumps(body), body=body)

    async def stream(self, request: UpstreamRequest) -> TranslatedStream | RelayStream:
        plan = self._plan(request, stream=True)
        if plan.relay:
            response = await self._response(plan.calls[0], request)
            relay = ParsedRelayStream if request.parsed else RelayStream
            return relay(
                response, self._deployment, self._secrets, request.timeout_s, self._base_url, self._max_event_bytes
            )
        streams = await run_all([self._open(call, request) for call in plan.calls], cleanup=_close)
        meta = chat_meta(plan.model) if request.api == "chat" else ChunkMeta(plan.model)
        return TranslatedStream(streams, _bases(plan.calls), meta, plan.include_usage, request.api)

    async def aclose(self) -> None:
        await self._session.close()

    async def _embed(self, request: UpstreamRequest) -> CompletionResult:
        """The calls' vectors in input order; usage as the upstream counted it, else estimated from the text."""
        adapter = self._adapter
        if not isinstance(adapter, EmbeddingAdapter):  # routing keeps embeddings away (`apis`)
            raise InvalidRequest(f"Deployment '{self._deployment}' does not serve /v1/embeddings.", param="model")
        plan = self._plan(request, stream=False)
        parts = await run_all([self._embedded(adapter, call, request) for call in plan.calls])
        dimensions = request.body.get("dimensions")
        vectors = [embeddings.shortened(vector, dimensions) for part in parts for vector in part.vectors]
        counted = [part.prompt_tokens for part in parts]
        if None in counted:
            tokens = embeddings.estimated_tokens(inputs_of(request.body.get("input")))
        else:
            tokens = sum(count for count in counted if count is not None)
        return embeddings.answer(vectors, plan.model, tokens, request.body.get("encoding_format"))

    async def _embedded(self, adapter: EmbeddingAdapter, call: UpstreamCall, request: UpstreamRequest) -> Embedded:
        _, answer = await self._answer(call, request)
        try:
            return adapter.embedded(call, answer)
        except SHAPE_ERRORS as exc:
            raise answer_error(as_answer_problem(exc), self._deployment, self._secrets) from None

    def _plan(self, request: UpstreamRequest, stream: bool) -> Plan:
        plan = self._adapter.plan(request.body, stream, request.api)
        if len(plan.calls) > self._max_fanout:
            param = _fanned_out_param(request)
            raise InvalidRequest(
                f"This request needs {len(plan.calls)} upstream calls on the deployment '{self._deployment}', "
                f"which allows at most {self._max_fanout} (provider.max_fanout): "
                + ("send fewer inputs." if param == "input" else "send fewer prompts or a smaller n."),
                param=param,
                code="too_many_upstream_calls",
            )
        return plan

    async def _call(self, call: UpstreamCall, request: UpstreamRequest) -> Reply:
        _, answer = await self._answer(call, request)
        try:
            return self._adapter.reply(call, answer)
        except SHAPE_ERRORS as exc:
            raise answer_error(as_answer_problem(exc), self._deployment, self._secrets) from None

    async def _answer(self, call: UpstreamCall, request: UpstreamRequest) -> tuple[bytes, dict[str, Any]]:
        """One call's whole answer: its bytes, and the JSON object they hold."""
        try:
            async with self._post(call, request, whole_answer_timeout(request.timeout_s)) as response:
                if response.status >= 300:
                    raise await self._failure(response)
                raw = await read_body(response, self._deployment, self._max_response_bytes)
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise transport_error(exc, self._deployment, request.timeout_s, self._base_url) from None
        return raw, json_object(raw, self._deployment, "answered with a body")

    async def _response(self, call: UpstreamCall, request: UpstreamRequest) -> aiohttp.ClientResponse:
        """One call's open event stream (its status and content type checked)."""
        try:
            response = await self._post(call, request, stream_timeout(request.timeout_s))
            if response.status >= 300:
                try:
                    raise await self._failure(response)
                finally:
                    response.release()
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise transport_error(exc, self._deployment, request.timeout_s, self._base_url) from None
        if not response.content_type.startswith("text/event-stream"):
            response.close()
            raise not_an_event_stream(self._deployment, response.content_type, self._secrets)
        return response

    async def _open(self, call: UpstreamCall, request: UpstreamRequest) -> CallStream:
        response = await self._response(call, request)
        translator = self._adapter.translator(call)
        end = self._adapter.end_marker
        return CallStream(
            response,
            translator,
            end,
            self._deployment,
            self._secrets,
            request.timeout_s,
            self._base_url,
            self._max_event_bytes,
        )

    def _post(
        self, call: UpstreamCall, request: UpstreamRequest, timeout: aiohttp.ClientTimeout
    ) -> aiohttp.client._RequestContextManager:
        headers = {
            "Content-Type": "application/json",
            **call.headers,
            **self._adapter.headers,
            "x-request-id": request.request_id,
        }
        return post(self._session, call.url, orjson.dumps(call.body), headers, timeout)

    async def _failure(self, response: aiohttp.ClientResponse) -> GatewayError:
        return await answer_failure(response, self._deployment, self._secrets, self._adapter.error_answer)


async def run_all(calls: Sequence[Awaitable[T]], cleanup: Callable[[T], Awaitable[None]] | None = None) -> list[T]:
    """Await the calls concurrently; on the first failure (or cancellation) cancel the rest, give
    back what the finished ones opened, and raise it. One call is simply awaited, with no task."""
    if len(calls) == 1:
        return [await calls[0]]
    tasks = [asyncio.ensure_future(call) for call in calls]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        if cleanup is not None:
            for outcome in outcomes:
                if not isinstance(outcome, BaseException):
                    await cleanup(outcome)
        raise


def _fanned_out_param(request: UpstreamRequest) -> str:
    if request.api == "embeddings":
        return "input"
    return "n" if (request.body.get("n") or 1) > 1 else "messages" if request.api == "chat" else "prompt"


def _bases(calls: Sequence[UpstreamCall]) -> list[int]:
    """The index of each call's first choice: choices are numbered across calls in order."""
    return [0, *accumulate(call.choices for call in calls)][:-1]


async def _close(stream: CallStream) -> None:
    await stream.aclose()
