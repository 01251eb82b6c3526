"""An OpenAI-compatible deployment that declares `responses: native`, on `/v1/responses`: native
pass-through to the upstream's own Responses API.

A request that carries its Responses body (`UpstreamRequest.native`, `api: "responses"`) is sent to
`{base_url}/responses` (Azure: its `/openai/v1/responses`) as the client wrote it, with the
deployment's model and credential, so that built-in tools, reasoning items, `include`, `store` and
whatever else the upstream acts on reach it intact; the answer (or each stream event) comes back as
it came. Beside it the provider gives the pipeline the chat view it reads: the output's text,
reasoning and function calls, and the upstream's usage (cached and reasoning tokens included).
Anything else (chat, completions, embeddings, the Messages API) is the OpenAI-compatible provider's.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import quote

import aiohttp
import orjson

from providers.base import CompletionResult, NativeRequest, Provider, UpstreamRequest
from providers.native.events import RelayedEvents
from providers.openai_compat import OpenAICompatibleOptions, OpenAICompatibleProvider
from providers.translated.adapter import answer_error, stream_error_event
from providers.translated.relay import RelayStream
from providers.upstream.client import (
    answer_failure,
    json_object,
    not_an_event_stream,
    post,
    read_body,
    stream_timeout,
    transport_error,
    whole_answer_timeout,
)

log = logging.getLogger(__name__)

# The events that close a Responses stream, each carrying the whole `response`.
CLOSING = frozenset({"response.completed", "response.incomplete", "response.failed"})
# Why a `response` stopped short, as chat says it.
_FINISH = {"max_output_tokens": "length", "content_filter": "content_filter"}


class ResponsesProvider(OpenAICompatibleProvider):
    """`OpenAICompatibleProvider`, which also sends a Responses body to the upstream's Responses API."""

    native_apis = frozenset({"responses"})

    def __init__(
        self,
        deployment: str,
        options: OpenAICompatibleOptions,
        credential: str | None,
        *,
        responses_url: str | None = None,
        responses_model: str | None = None,
        **addresses: Any,
    ) -> None:
        super().__init__(deployment, options, credential, **addresses)
        self._responses_url = responses_url or options.base_url.rstrip("/") + "/responses"
        self._responses_model = responses_model or options.model  # None: the client's, as chat sends it

    async def complete(self, request: UpstreamRequest) -> CompletionResult:
        native = request.native
        if native is None or native.api != "responses":
            return await super().complete(request)
        try:
            async with self._post_native(request, native, whole_answer_timeout(request.timeout_s)) as response:
                if response.status >= 300:
                    raise await answer_failure(response, self._deployment, self._secrets)
                raw = await read_body(response, self._deployment, self._max_response_bytes)
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise transport_error(exc, self._deployment, request.timeout_s, self._base_url) from None
        answer = json_object(raw, self._deployment, "answered with a body")
        view = chat_view(answer)
        native.outcome.deployment = self._deployment
        native.outcome.response_id = view["id"] if type(view["id"]) is str else None
        return CompletionResult(raw, view, native=True)

    async def stream(self, request: UpstreamRequest) -> RelayStream | ResponsesStream:  # type: ignore[override]
        native = request.native
        if native is None or native.api != "responses":
            return await super().stream(request)
        try:
            response = await self._post_native(request, native, stream_timeout(request.timeout_s))
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
        native.outcome.deployment = self._deployment
        return ResponsesStream(
            response, self._deployment, self._secrets, request.timeout_s, self._base_url, self._max_event_bytes
        )

    async def delete_response(self, response_id: str, request_id: str, timeout_s: float) -> bool:
        """Delete a response the upstream stored (`DELETE …/responses/{id}`): whether it is gone
        (one the upstream does not hold, a 404, is gone too); never raises for the upstream's answer."""
        url = f"{self._responses_url.split('?')[0]}/{quote(response_id, safe='')}"
        headers = {**self._headers, "x-request-id": request_id}
        try:
            async with self._session.delete(
                url, headers=headers, timeout=whole_answer_timeout(timeout_s), allow_redirects=False
            ) as response:
                return response.status < 300 or response.status == 404
        except (TimeoutError, aiohttp.ClientError) as exc:
            log.warning(
                "deployment %s: deleting a stored response upstream failed (%s)", self._deployment, type(exc).__name__
            )
            return False

    def _post_native(
        self, request: UpstreamRequest, native: NativeRequest, timeout: aiohttp.ClientTimeout
    ) -> aiohttp.client._RequestContextManager:
        # The model in its place (dict order kept), as chat names it: the deployment's, else the client's.
        sent = native.body if native.rebuilt is None else native.body_for(self._deployment)
        body = {**sent, "model": self._responses_model or request.body["model"]}
        headers = {**self._headers, "x-request-id": request.request_id}
        return post(self._session, self._responses_url, orjson.dumps(body), headers, timeout)


def chat_view(response: dict[str, Any]) -> dict[str, Any]:
    """What the pipeline reads of a `response` (usage to meter; model, id, finish and texts to
    trace), as a chat completion: nothing of it reaches the client."""
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for item in response.get("output") or ():
        kind = item.get("type") if type(item) is dict else None
        if kind == "message":
            texts += [part["text"] for part in item.get("content") or () if type(part) is dict and "text" in part]
        elif kind == "function_call":
            function = {"name": item.get("name"), "arguments": item.get("arguments")}
            calls.append({"id": item.get("call_id"), "type": "function", "function": function})
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    if calls:
        message["tool_calls"] = calls
    details = response.get("incomplete_details")
    reason = details.get("reason") if type(details) is dict else None
    finish = _FINISH.get(reason) if type(reason) is str else None
    choice = {"index": 0, "message": message, "finish_reason": finish or ("tool_calls" if calls else "stop")}
    view = {"id": response.get("id"), "object": "chat.completion", "model": response.get("model"), "choices": [choice]}
    used = chat_usage(response.get("usage"))
    if used is not None:
        view["usage"] = used
    return view


def chat_usage(usage: Any) -> dict[str, Any] | None:
    """A Responses `usage` as chat counts it: input tokens the prompt's (cached ones among them,
    and cache writes where the upstream reports them), output tokens the completion's."""
    if type(usage) is not dict:
        return None
    prompt, completion = usage.get("input_tokens"), usage.get("output_tokens")
    prompt = prompt if type(prompt) is int and prompt >= 0 else 0
    completion = completion if type(completion) is int and completion >= 0 else 0
    body: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    read = usage.get("input_tokens_details")
    if type(read) is dict and (read.get("cached_tokens") or read.get("cache_write_tokens")):
        body["prompt_tokens_details"] = {
            name: _count(read.get(name)) for name in ("cached_tokens", "cache_write_tokens") if name in read
        }
    return body


def _count(value: Any) -> int:
    return value if type(value) is int and value >= 0 else 0


class ResponsesStream(RelayedEvents):
    """The upstream's Responses events relayed as they came, checked as every native stream is
    (`RelayedEvents`): an `error` event a scrubbed 502, a stream cut (or ended by `[DONE]`) before its
    closing event (`response.completed`, `.incomplete` or `.failed`) an error. Its usage is the
    closing `response`'s (`reported_usage`)."""

    observed = CLOSING | {"error"}
    closing = "response.completed"
    ends_at_done = True
    _usage: dict[str, Any] | None = None

    def _observe(self, event: dict[str, Any]) -> None:
        if event["type"] == "error":
            raise answer_error(stream_error_event(event), self._deployment, self._secrets)
        self._ended = True
        final = event.get("response")
        self._usage = chat_usage(final.get("usage")) if isinstance(final, dict) else None

    def reported_usage(self) -> dict[str, Any] | None:
        return self._usage


def create(deployment: str, options: OpenAICompatibleOptions, credential: str | None) -> Provider:
    """An `openai` deployment: with `responses: native`, one that also speaks the Responses API."""
    if options.responses == "native":
        return ResponsesProvider(deployment, options, credential)
    return OpenAICompatibleProvider(deployment, options, credential)
