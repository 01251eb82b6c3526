"""HTTP handlers: read, call the pipeline, render. No policy decisions live here."""

from __future__ import annotations

import functools
import time
from typing import Any, Protocol

import orjson
from aiohttp import web

from gateway.api.errors import GatewayError
from gateway.api.parsing import decode_json_object
from gateway.api.response_headers import IGNORED_FIELDS, OVERHEAD_MS, ms
from gateway.http import responses, responses_native
from gateway.http.app_keys import READINESS, RECORD, SERVING
from gateway.keys.records import KeyRecord
from gateway.observability.record import RequestRecord
from gateway.pipeline import cached
from gateway.pipeline.exchange import ClientScope, Framing, outlive_client
from gateway.pipeline.flow import AnswerRenderer, Pipeline, PreparedCall
from gateway.pipeline.serving import ServingState
from policies.guardrails import GuardrailViolation
from policies.limits.errors import BudgetExceeded, RateLimited
from policies.limits.service import Admission
from providers.base import Api, NativeRequest

COMPLETION_PATHS = ("/v1/completions", "/completions", "/ai-proxy/completions")
CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")
EMBEDDINGS_PATHS = ("/v1/embeddings", "/embeddings")
MESSAGES_PATHS = ("/v1/messages",)  # Anthropic's Messages API, translated onto chat (gateway.http.messages)
# Every path of a client API, and which (the `api` label of the metrics, the access log's `api`).
API_PATHS: dict[str, str] = {
    **dict.fromkeys(COMPLETION_PATHS, "completions"),
    **dict.fromkeys(CHAT_PATHS, "chat"),
    **dict.fromkeys(EMBEDDINGS_PATHS, "embeddings"),
    **dict.fromkeys(MESSAGES_PATHS, "messages"),
}
# The `api` label of every path counted (`/v1/responses` is bridged onto the chat pipeline).
API_LABELS: dict[str, str] = {**API_PATHS, **dict.fromkeys(responses.RESPONSES_PATHS, "responses")}


class Edge(Protocol):
    """A client API served as a translation onto one of the pipeline's own (the Messages API onto
    chat): its body in, its answers and stream events out."""

    def request(self, payload: dict[str, Any]) -> dict[str, Any]: ...

    def answer(self, body: bytes) -> bytes:
        """A pipeline's answer (chat's shape, or a cached one of either shape) in the edge's API."""
        ...

    def framing(self, call: PreparedCall) -> Framing:
        """How a streamed call's events are written (asked only of a stream)."""
        ...

    def ignored(self, call: PreparedCall) -> list[str]:
        """The fields of the client's body that `call`'s upstream will not be sent."""
        ...

    @property
    def native(self) -> NativeRequest | None:
        """The client's own body, once `request` read it, for a provider that speaks its API."""


REFRESH_HEADERS = ("x-gateway-refresh-config", "x-enkrypt-refresh-cache")


class CompletionEndpoints:
    """The handlers of the client APIs, holding the app's serving state once start-up made it
    (an attribute read, where `request.app[SERVING]` costs three calls a request)."""

    def __init__(self) -> None:
        self.serving: ServingState | None = None

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await _serve(request, self._serving(), "completions")

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        """`POST /v1/chat/completions`: the same pipeline, asked for the chat API."""
        return await _serve(request, self._serving(), "chat")

    async def embeddings(self, request: web.Request) -> web.StreamResponse:
        """`POST /v1/embeddings`: the same pipeline, asked for the embeddings API."""
        return await _serve(request, self._serving(), "embeddings")

    async def responses(self, request: web.Request) -> web.StreamResponse:
        """`POST /v1/responses`: bridged at the edge onto the chat pipeline."""
        return await _serve(request, self._serving(), "chat", bridge=True)

    async def translated(self, request: web.Request, api: Api, edge: Edge) -> web.StreamResponse:
        """A client API translated at `edge` onto `api`'s pipeline (`/v1/messages` onto chat)."""
        return await _serve(request, self._serving(), api, edge)

    def serving_state(self) -> ServingState:
        """The app's serving state (`count_tokens` reads its pipeline without a call through it)."""
        return self._serving()

    def _serving(self) -> ServingState:
        # Set at start-up with app[SERVING] (one assignment): a request never comes before it.
        assert self.serving is not None
        return self.serving


async def _serve(
    request: web.Request, serving: ServingState, api: Api, edge: Edge | None = None, *, bridge: bool = False
) -> web.StreamResponse:
    started = time.perf_counter()
    if _asks_for_refresh(request):
        await serving.current.pipeline.authenticate(request.headers)  # only a known caller may reload
        await serving.reload_for_request()
    with serving.hold() as pipeline:  # this request finishes on the config it started with
        record = request[RECORD]
        caller = await pipeline.authenticate(request.headers)
        record.authenticated("-" if caller.source == "open" else caller.name, caller.metadata)
        payload = decode_json_object(await request.read(), request.headers.get("Content-Type"))
        model = payload.get("model")
        if type(model) is str:
            record.model = model
        render: AnswerRenderer | None = None
        extra: dict[str, str] = {}
        capable: responses_native.NativeCapable | None = None
        if bridge and "responses" in pipeline.native_apis:  # the body as it came, for a deployment that takes it
            capable = await responses_native.prepared(serving.shared.responses, caller, request.headers, payload)
            payload, render = capable.chat, capable.render
        elif bridge:
            payload, render, extra = await responses.bridged(
                serving.shared.responses, caller, request.headers, payload, record
            )
        native = None if capable is None else capable.native
        if edge is not None:
            payload = edge.request(payload)
            native = edge.native
        try:
            call = await pipeline.prepare(
                caller, request.headers, payload, record.request_id, api, record.routed, render, native
            )
        except GuardrailViolation as denied:
            record.guardrail(denied.policy, denied.verdict.stage, denied.verdict.check, "deny")
            if bridge:
                raise responses.renamed(denied) from None
            raise
        except GatewayError as error:
            if bridge:  # a chat field refused, named as the Responses body names it
                raise responses.renamed(error) from None
            raise
        if capable is not None:
            responses_native.routed(call, record, capable)
        record.stream = call.stream
        if call.credential is not None:
            record.virtual_key = call.credential.name
        if extra:
            call.response_headers.update(extra)
        if edge is not None and (ignored := edge.ignored(call)):
            record.ignored_fields = call.response_headers[IGNORED_FIELDS] = ",".join(ignored)
        if call.plan.tags:
            record.tags = ",".join(call.plan.tags)[:200]
        scope = ClientScope(
            call.headers_from(call.plan.tiers[0].members[0], 0), record.first_byte, record.stream_failed
        )
        if edge is not None and call.stream:
            scope.framing = edge.framing(call)
        elif render is not None and call.stream:  # the Responses API's (bridged or native)
            scope.framing = render.framing
        # From here the work runs in a task of its own: a client that leaves cancels only its
        # upstream call and relay, never the settlement, the cache write or the request's record.
        work = serving.spawn(_exchange(request, record, pipeline, caller, call, scope, started, edge), scope)
        if not bridge:
            return await outlive_client(work, scope)
        try:
            return await outlive_client(work, scope)
        except GatewayError as error:  # a chat field the deployment refused, named as the client sent it
            raise responses.renamed(error) from None


async def _exchange(
    request: web.Request,
    record: RequestRecord,
    pipeline: Pipeline,
    caller: KeyRecord,
    call: PreparedCall,
    scope: ClientScope,
    started: float,
    edge: Edge | None,
) -> web.StreamResponse:
    try:
        admission = await _admit(pipeline, caller, call, record)
        scope.settles_with(functools.partial(pipeline.settle, admission, call))
        try:
            return await _answer(request, pipeline, call, scope, started, edge)
        finally:  # also when the call failed or the client left: charge what was used
            await scope.settle()
    finally:  # the input checks ran even when a limit then refused the call
        _observe(record, call)


async def _admit(pipeline: Pipeline, caller: KeyRecord, call: PreparedCall, record: RequestRecord) -> Admission:
    try:
        return await pipeline.admit(caller, call)
    except RateLimited as limited:
        record.rate_limited(limited.scope)
        raise
    except BudgetExceeded:
        record.budget_spent()
        raise


def _observe(record: RequestRecord, call: PreparedCall) -> None:
    """What the metrics and the access log read at the end of the request."""
    record.usage(call.usage.prompt_tokens, call.usage.completion_tokens)
    if call.guarded is not None:
        for verdict in call.guarded.verdicts:
            record.guardrail(call.guarded.policy, verdict.stage, verdict.check, verdict.verdict)


async def _answer(
    request: web.Request, pipeline: Pipeline, call: PreparedCall, scope: ClientScope, started: float, edge: Edge | None
) -> web.StreamResponse:
    if call.cache is not None:
        return await _through_cache(request, pipeline, call, scope, started, edge)
    if call.stream:
        return await cached.relay_own(request, pipeline, call, scope, started, {})
    upstream_started = time.perf_counter()
    with scope.cancellable():
        result, served = await pipeline.complete(call)
    finished = time.perf_counter()
    headers = call.headers_from(served.deployment, served.attempts)
    body = result.raw if call.render is None else await call.render.body(result.raw, scope)
    if edge is not None and not result.native:  # a native answer is in the client's API already
        body = edge.answer(body)
    headers[OVERHEAD_MS] = ms((upstream_started - started) + (time.perf_counter() - finished))
    return web.Response(body=body, content_type="application/json", headers=headers)


async def _through_cache(
    request: web.Request, pipeline: Pipeline, call: PreparedCall, scope: ClientScope, started: float, edge: Edge | None
) -> web.StreamResponse:
    if call.stream:
        return await cached.stream(request, pipeline, call, scope, started)
    reply = await cached.complete(pipeline, call, scope)
    body = reply.body if call.render is None else await call.render.body(reply.body, scope)
    reply.headers[OVERHEAD_MS] = ms(time.perf_counter() - started - reply.waited_s)
    if edge is not None:
        body = edge.answer(body)
    return web.Response(body=body, content_type="application/json", headers=reply.headers)


def _asks_for_refresh(request: web.Request) -> bool:
    for header in REFRESH_HEADERS:  # a plain loop: this runs on every request, and almost never finds one
        value = request.headers.get(header)
        if value is not None and value.strip().lower() == "true":
            return True
    return False


async def list_models(request: web.Request) -> web.Response:
    pipeline = request.app[SERVING].current.pipeline
    caller = await pipeline.authenticate(request.headers)
    data = [
        {
            "id": model,
            "object": "model",
            "created": 0,
            "owned_by": deployment.provider_type,
            "deployment": deployment.name,
        }
        for model, deployment in pipeline.models_for(caller)  # each id once (a group's alias too)
    ]
    return _json({"object": "list", "data": data})


async def health(request: web.Request) -> web.Response:
    return _json({"status": "ok"})


async def ready(request: web.Request) -> web.Response:
    serving = request.app[SERVING]
    generation, shared = serving.current, serving.shared
    status, body = await request.app[READINESS].report(
        generation.loaded.source, generation.pipeline.deployments, shared.breakers, shared.timing.wall()
    )
    return _json(body, status=status)


def _json(body: object, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(body), status=status, content_type="application/json")
