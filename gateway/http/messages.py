"""`POST /v1/messages`: Anthropic's Messages API, served as a translation onto the chat pipeline.

The body is validated and translated at the edge (`gateway.api.messages.request`); from there the
request is a chat request like any other (one auth, routing, cache, guardrails, limits, record),
and its answer (`answer`) and stream (`events`) are translated back; every error under
`/v1/messages` is written in Anthropic's shape by the middleware (`errors`). The metrics and the
access log name the API `messages` (the path's). `?beta=true` (Claude Code's) and the
`anthropic-version` header are accepted; the gateway speaks one version of the API.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web

from gateway.api.errors import GatewayError, InvalidRequest
from gateway.api.messages.answer import from_chat
from gateway.api.messages.events import MessageEvents
from gateway.api.messages.request import to_chat
from gateway.api.parsing import decode_json_object, validate_chat
from gateway.api.schemas import FieldError
from gateway.http.handlers import CompletionEndpoints
from gateway.pipeline.exchange import Framing
from gateway.pipeline.flow import PreparedCall
from policies.limits.estimate import estimate

SERVED_THROUGH_CHAT = "/v1/messages is served through the chat API: by deployments whose `apis` include chat."


class MessagesEdge:
    """One request's translation (it keeps the stop sequences its answer's stop_reason is told by)."""

    def __init__(self) -> None:
        self._stops: list[str] = []

    def request(self, payload: dict[str, Any]) -> dict[str, Any]:
        try:
            chat = to_chat(payload)
        except FieldError as wrong:
            raise InvalidRequest(wrong.message, param=wrong.field) from None
        self._stops = chat.get("stop") or []
        return chat

    def answer(self, body: bytes) -> bytes:
        return orjson.dumps(from_chat(orjson.loads(body), self._stops))

    def framing(self, call: PreparedCall) -> Framing:
        return MessageEvents(self._stops, call.estimate.prompt_tokens)


def count_tokens(endpoints: CompletionEndpoints) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """`POST /v1/messages/count_tokens`: `{"input_tokens"}` for a Messages body (no `max_tokens`
    needed): the deployment's own count where its provider has a tokenizer (local), else the
    gateway's estimate of what the chat upstream would read (the limits' own:
    `policies.limits.estimate`, about four characters a token, images and files at fixed figures).
    The caller must be allowed the model, which must exist; nothing is sent upstream."""

    async def counted(request: web.Request) -> web.StreamResponse:
        pipeline = endpoints.serving_state().current.pipeline
        caller = await pipeline.authenticate(request.headers)
        payload = decode_json_object(await request.read(), request.headers.get("Content-Type"))
        payload.setdefault("max_tokens", 1)  # not part of a count's body: the translation wants one
        chat = MessagesEdge().request(payload)
        plan = pipeline.router.plan(request.headers, chat["model"], caller, "chat")  # 404/403/400 as a call would
        tokens = estimate(validate_chat(chat), chat).prompt_tokens
        # A provider that knows its tokenizer (local) counts exactly; `getattr`: the rest do not.
        first = plan.tiers[0].members[0]
        counter = getattr(first.provider, "count_prompt_tokens", None)
        if counter is not None:
            tokens = await counter({**chat, "model": first.name})
        return web.Response(body=orjson.dumps({"input_tokens": tokens}), content_type="application/json")

    return counted


def handler(endpoints: CompletionEndpoints) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def messages(request: web.Request) -> web.StreamResponse:
        try:
            return await endpoints.translated(request, "chat", MessagesEdge())
        except GatewayError as error:  # the middleware writes it in Anthropic's shape (`MESSAGES_PREFIX`)
            if error.code == "unsupported_api":
                error.message += f" {SERVED_THROUGH_CHAT}"
            raise

    return messages
