"""An Anthropic deployment on `/v1/messages`: native pass-through.

A request that carries its Messages body (`UpstreamRequest.native`) is sent as the client wrote
it, with the deployment's model and credential and the client's `anthropic-beta` header, so that
prompt caching (`cache_control`), thinking and its signatures reach Anthropic intact; the answer
(or each stream event) comes back as it came. Beside it the provider gives the pipeline the chat
view it reads: the answer's text, thinking (as `reasoning_content`) and tool calls, and Anthropic's
usage (cache writes and reads included). Anything else (chat, completions) is the translation.
"""

from __future__ import annotations

from typing import Any

import aiohttp

from providers.anthropic import AnthropicAdapter, AnthropicOptions, MessagesStreamTranslator
from providers.base import CompletionResult, NativeRequest, Provider, UpstreamRequest
from providers.chat.shape import message_choice
from providers.completion_shape import Usage
from providers.native.events import RelayedEvents
from providers.translated.adapter import SHAPE_ERRORS, UpstreamCall, answer_error, as_answer_problem
from providers.translated.provider import TranslatedProvider
from providers.translated.relay import RelayStream
from providers.translated.stream import TranslatedStream
from providers.upstream.scrubbing import Secrets


class AnthropicProvider(TranslatedProvider):
    native_apis = frozenset({"messages"})  # a Messages body is sent as it came

    def __init__(self, deployment: str, options: AnthropicOptions, credential: str | None) -> None:
        self._messages = AnthropicAdapter(deployment, options, credential)
        super().__init__(deployment, self._messages, credential, options)
        self._name = deployment
        self._count_url = self._messages.url + "/count_tokens"

    async def complete(self, request: UpstreamRequest) -> CompletionResult:
        if request.native is None or request.native.api != "messages" or request.api != "chat":
            return await super().complete(request)
        call = self._native_call(request, request.native)
        raw, answer = await self._answer(call, request)
        try:
            reply = self._messages.reply(call, answer)
            thinking = "".join(str(b.get("thinking", "")) for b in answer["content"] if _is_thinking(b))
        except SHAPE_ERRORS as exc:
            raise answer_error(as_answer_problem(exc), self._name, self._secrets) from None
        # The chat view the pipeline reads (usage to meter; model, id, finish, texts to trace), made
        # from the one reply directly: nothing of it reaches the client.
        choice = message_choice(0, reply.choices[0])
        if thinking:
            choice["message"]["reasoning_content"] = thinking
        body = {"id": answer.get("id"), "object": "chat.completion", "model": reply.model or call.body["model"]}
        body["choices"] = [choice]
        if reply.usage is not None:
            body["usage"] = usage_body(reply.usage, answer.get("usage"))
        return CompletionResult(raw, body, native=True)

    async def stream(self, request: UpstreamRequest) -> TranslatedStream | RelayStream | NativeStream:  # type: ignore[override]
        if request.native is None or request.native.api != "messages" or request.api != "chat":
            return await super().stream(request)
        response = await self._response(self._native_call(request, request.native), request)
        return NativeStream(
            response, self._name, self._secrets, request.timeout_s, self._base_url, self._max_event_bytes
        )

    async def count_message_tokens(self, native: NativeRequest, request_id: str, timeout_s: float) -> int:
        """Anthropic's own count of a Messages body (`/v1/messages/count_tokens`)."""
        body = {**native.body, "model": self._messages.model(native.body)}
        call = UpstreamCall(self._count_url, body, 1, "chat", native.headers)
        _, answer = await self._answer(call, UpstreamRequest(body, request_id, timeout_s, "chat"))
        tokens = answer.get("input_tokens")
        if type(tokens) is not int or tokens < 0:
            raise answer_error(as_answer_problem(ValueError()), self._name, self._secrets)
        return tokens

    def _native_call(self, request: UpstreamRequest, native: NativeRequest) -> UpstreamCall:
        # The model in its place (dict order kept): the body is otherwise the client's, byte for byte
        # as JSON re-encodes it.
        body = {**native.body, "model": self._messages.model(request.body)}
        return UpstreamCall(self._messages.url, body, 1, "chat", native.headers)


def _is_thinking(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "thinking"


def usage_body(usage: Usage, native: Any) -> dict[str, Any]:
    """The chat usage of an Anthropic answer: prompt tokens are every input token (fresh, written
    to the prompt cache, read from it), `cached_tokens` those read, `cache_write_tokens` those
    written (priced apart: `cache_write_per_1m`)."""
    body: dict[str, Any] = {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
    }
    details: dict[str, int] = {}
    if usage.cached_tokens is not None:
        details["cached_tokens"] = usage.cached_tokens
    written = native.get("cache_creation_input_tokens") if isinstance(native, dict) else None
    if type(written) is int and written > 0:
        details["cache_write_tokens"] = written
    if details:
        body["prompt_tokens_details"] = details
    return body


# The events whose content a relayed stream reads: usage (start, delta), its end, an error.
_OBSERVED = frozenset({"message_start", "message_delta", "message_stop", "error"})


class NativeStream(RelayedEvents):
    """Anthropic's stream events relayed as they came, checked as every native stream is
    (`RelayedEvents`): an `error` event a scrubbed 502, a stream cut before `message_stop` an error.
    Its usage is Anthropic's own (`reported_usage`)."""

    observed = _OBSERVED
    closing = "message_stop"

    def __init__(
        self,
        response: aiohttp.ClientResponse,
        deployment: str,
        secrets: Secrets,
        timeout_s: float,
        base_url: str,
        max_event_bytes: int,
    ) -> None:
        super().__init__(response, deployment, secrets, timeout_s, base_url, max_event_bytes)
        self._events = MessagesStreamTranslator("chat")
        self._written = 0

    def _observe(self, event: dict[str, Any]) -> None:
        try:
            self._events.feed(event)
        except SHAPE_ERRORS as exc:
            raise answer_error(as_answer_problem(exc), self._deployment, self._secrets) from None
        if event["type"] == "message_start":
            usage = (event.get("message") or {}).get("usage") or {}
            written = usage.get("cache_creation_input_tokens")
            self._written = written if type(written) is int and written > 0 else 0
        self._ended = self._events.ended

    def reported_usage(self) -> dict[str, Any] | None:
        usage = self._events.usage
        if usage is None:
            return None
        native = {"cache_creation_input_tokens": self._written}
        return usage_body(usage, native)


def create(deployment: str, options: AnthropicOptions, credential: str | None) -> Provider:
    return AnthropicProvider(deployment, options, credential)
