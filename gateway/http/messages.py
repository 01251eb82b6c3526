"""`POST /v1/messages`: Anthropic's Messages API, served as a translation onto the chat pipeline.

The body is validated and translated at the edge (`gateway.api.messages.request`); from there the
request is a chat request like any other (one auth, routing, cache, guardrails, limits, record),
and its answer (`answer`) and stream (`events`) are translated back; every error under
`/v1/messages` is written in Anthropic's shape by the middleware (`errors`). The metrics and the
access log name the API `messages` (the path's). `?beta=true` (Claude Code's) and the
`anthropic-version` header are accepted; the gateway speaks one version of the API.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import orjson
from aiohttp import web

from gateway.api.errors import GatewayError, InvalidRequest
from gateway.api.messages.answer import from_chat
from gateway.api.messages.events import MessageEvents
from gateway.api.messages.request import to_chat, untranslated
from gateway.api.parsing import decode_json_object, validate_chat
from gateway.api.schemas import FieldError
from gateway.http.app_keys import RECORD
from gateway.http.handlers import CompletionEndpoints
from gateway.pipeline.exchange import Framing
from gateway.pipeline.flow import PreparedCall
from gateway.pipeline.native.policy import sends_native
from policies.limits.estimate import estimate
from providers.base import NativeRequest

SERVED_THROUGH_CHAT = "/v1/messages is served through the chat API: by deployments whose `apis` include chat."


def beta_header(headers: Mapping[str, str]) -> dict[str, str]:
    """The client's `anthropic-beta`, which only an Anthropic deployment is sent."""
    beta = headers.get("anthropic-beta")
    return {} if beta is None else {"anthropic-beta": beta}


class MessagesEdge:
    """One request's translation (it keeps the stop sequences its answer's stop_reason is told by),
    and its Messages body itself (`native`), which an Anthropic deployment is sent as it came."""

    def __init__(self, headers: Mapping[str, str] | None = None) -> None:
        self._stops: list[str] = []
        self._beta = beta_header(headers or {})
        self.native: NativeRequest | None = None

    def request(self, payload: dict[str, Any]) -> dict[str, Any]:
        try:
            chat = to_chat(payload)
        except FieldError as wrong:
            raise InvalidRequest(wrong.message, param=wrong.field) from None
        self._stops = chat.get("stop") or []
        self.native = NativeRequest(payload, self._beta)
        return chat

    def ignored(self, call: PreparedCall) -> list[str]:
        """What a chat upstream is not sent; nothing when the body goes to an Anthropic deployment as
        it came (the route's first candidate)."""
        if call.native is None or sends_native(call.plan.tiers[0].members[0], call.native):
            return []
        return untranslated(call.native.body)

    def answer(self, body: bytes) -> bytes:
        """A chat answer (or one from the cache, of either kind) as a Messages answer; an Anthropic
        deployment's own answer (the pipeline's `CompletionResult.native`) never comes here."""
        answer = orjson.loads(body)
        if answer.get("type") == "message":  # a native answer, from the cache: as it came
            return body
        return orjson.dumps(from_chat(answer, self._stops))

    def framing(self, call: PreparedCall) -> Framing:
        return MessageEvents(self._stops, call.estimate.prompt_tokens)


def count_tokens(endpoints: CompletionEndpoints) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """`POST /v1/messages/count_tokens`: `{"input_tokens"}` for a Messages body (no `max_tokens`
    needed): on an Anthropic deployment Anthropic's own count (the body as the client sent it, the
    model replaced: its answer or its error); the deployment's own count where its provider has a
    tokenizer (local); else the gateway's estimate of what the chat upstream would read (the limits' own:
    `policies.limits.estimate`, about four characters a token, images and files at fixed figures).
    The caller must be allowed the model, which must exist; only Anthropic is asked anything, with
    the credential the call would use (a virtual key's, when the caller names one)."""

    async def counted(request: web.Request) -> web.StreamResponse:
        pipeline = endpoints.serving_state().current.pipeline
        caller = await pipeline.authenticate(request.headers)
        payload = decode_json_object(await request.read(), request.headers.get("Content-Type"))
        counted_body = dict(payload)  # what Anthropic's own count is sent: no max_tokens added
        payload.setdefault("max_tokens", 1)  # not part of a count's body: the translation wants one
        chat = MessagesEdge().request(payload)
        plan = pipeline.router.plan(request.headers, chat["model"], caller, "chat")  # 404/403/400 as a call would
        first = plan.tiers[0].members[0]
        # The credential the call would use: a virtual key's (403 when the caller may not use it).
        credential = await pipeline.gatekeeper.credential(caller, request.headers, first)
        provider = None if first.provider is None else pipeline.provider_for(first, credential)
        # An Anthropic deployment asks Anthropic's own count (the client's body, `anthropic-beta`
        # with it); a provider that knows its tokenizer (local) counts exactly; `getattr`: the rest
        # do neither, and answer the estimate.
        upstream = getattr(provider, "count_message_tokens", None)
        counter = getattr(provider, "count_prompt_tokens", None)
        if upstream is not None:
            native = NativeRequest({**counted_body, "model": first.name}, beta_header(request.headers))
            tokens = await upstream(native, request[RECORD].request_id, first.timeout_s)
        elif counter is not None:
            tokens = await counter({**chat, "model": first.name})
        else:
            tokens = estimate(validate_chat(chat), chat).prompt_tokens
        return web.Response(body=orjson.dumps({"input_tokens": tokens}), content_type="application/json")

    return counted


def handler(endpoints: CompletionEndpoints) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def messages(request: web.Request) -> web.StreamResponse:
        try:
            return await endpoints.translated(request, "chat", MessagesEdge(request.headers))
        except GatewayError as error:  # the middleware writes it in Anthropic's shape (`MESSAGES_PREFIX`)
            if error.code == "unsupported_api":
                error.message += f" {SERVED_THROUGH_CHAT}"
            raise

    return messages
