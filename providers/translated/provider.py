"""A provider for any API whose shapes an `Adapter` translates: the HTTP side, the same for all.

A Completions request becomes the adapter's planned calls (one per prompt, or per prompt and
sample), made concurrently on the deployment's one pooled session; their answers are merged into
one `text_completion` with choices indexed as OpenAI indexes them. A Chat Completions request
(`api="chat"`) is planned and merged the same way into one `chat.completion` (or relayed as it
came, when the upstream speaks that API already). Failures map as they do for OpenAI-compatible
upstreams: 4xx pass through, 5xx / unreachable / malformed are 502, timeouts 504.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from itertools import accumulate
from typing import Any, TypeVar

import aiohttp
import orjson

from gateway.api.errors import GatewayError, InvalidRequest
from providers.base import TEXT_APIS, Api, CompletionResult, UpstreamRequest
from providers.chat.shape import chat_body, chat_meta
from providers.completion_shape import ChunkMeta, Reply, completion_body
from providers.options import TranslatedOptions
from providers.translated.adapter import SHAPE_ERRORS, Adapter, Plan, UpstreamCall, answer_error, as_answer_problem
from providers.translated.relay import RelayStream
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
    apis: frozenset[Api] = TEXT_APIS  # every adapter translates both text APIs

    def __init__(self, deployment: str, adapter: Adapter, credential: str | None, options: TranslatedOptions) -> None:
        self._deployment = deployment
        self._adapter = adapter
        self._secrets = Secrets(credential, *credential_headers(options.headers))
        self._max_fanout = options.max_fanout
        self._base_url = options.base_url  # named in transport errors (without credentials or query)
        self._session = new_session(options.max_connections)
        self._max_response_bytes = options.max_response_bytes
        self._max_event_bytes = options.max_event_bytes

    async def complete(self, request: UpstreamRequest) -> CompletionResult:
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
            return RelayStream(
                response, self._deployment, self._secrets, request.timeout_s, self._base_url, self._max_event_bytes
            )
        streams = await run_all([self._open(call, request) for call in plan.calls], cleanup=_close)
        meta = chat_meta(plan.model) if request.api == "chat" else ChunkMeta(plan.model)
        return TranslatedStream(streams, _bases(plan.calls), meta, plan.include_usage, request.api)

    async def aclose(self) -> None:
        await self._session.close()

    def _plan(self, request: UpstreamRequest, stream: bool) -> Plan:
        plan = self._adapter.plan(request.body, stream, request.api)
        if len(plan.calls) > self._max_fanout:
            param = "n" if (request.body.get("n") or 1) > 1 else "messages" if request.api == "chat" else "prompt"
            raise InvalidRequest(
                f"This request needs {len(plan.calls)} upstream calls on the deployment '{self._deployment}', "
                f"which allows at most {self._max_fanout} (provider.max_fanout): send fewer prompts or a smaller n.",
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


def _bases(calls: Sequence[UpstreamCall]) -> list[int]:
    """The index of each call's first choice: choices are numbered across calls in order."""
    return [0, *accumulate(call.choices for call in calls)][:-1]


async def _close(stream: CallStream) -> None:
    await stream.aclose()
