"""The one object that owns the order of a completion request: auth, validate, route, admit, call.

One pipeline serves every client API: `/v1/completions`, `/v1/chat/completions` and `/v1/embeddings`
differ only in how the body is validated, which deployments serve them (`Deployment.apis`), how the
guardrails read texts (`guarding` / `chat_guarding` / `embeddings_guarding`), how the limits estimate
them (an embedding's tokens are all input) and the `api` the provider is asked with; routing,
retries, fallbacks, breakers, cache, limits and metering are the same steps.

HTTP handlers stay thin (read the body, call the pipeline, render), so the flow is testable
without a socket and later stages slot in here in one place. The cache's plan is made here; its
lookup and fill wrap `complete` / `open_stream` in `gateway.pipeline.cached`. Keys, virtual keys, limits
and budgets are asked through `gateway.pipeline.admission`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from gateway.api.chat import ChatRequest
from gateway.api.credentials import Principal
from gateway.api.embeddings import EmbeddingsRequest
from gateway.api.errors import GatewayError
from gateway.api.parsing import validate_chat, validate_completion, validate_embeddings
from gateway.api.response_headers import served_by
from gateway.api.schemas import CompletionRequest
from gateway.keys.records import KeyRecord
from gateway.pipeline import traced
from gateway.pipeline.admission import Credential, Gatekeeper
from gateway.pipeline.answer_guarding import GuardedStream, check_result
from gateway.pipeline.chat_guarding import ChatGuardedStream, check_chat_input, check_chat_result
from gateway.pipeline.embeddings_guarding import check_embeddings_input
from gateway.pipeline.exchange import ClientScope, Framing
from gateway.pipeline.guarding import GuardedCall, check_input
from gateway.pipeline.native.policy import check_answer, guarded_stream, sends_native
from gateway.pipeline.native.redaction import redact_native
from gateway.pipeline.usage import Usage
from gateway.routing.attempts import AttemptRunner, Lease
from gateway.routing.deployments import Deployment
from gateway.routing.plan import RoutePlan, Router
from policies.cache import CachePlan, ResponseCache, TieredCache
from policies.guardrails import pop_context
from policies.limits.estimate import Estimate, estimate
from policies.limits.service import Admission
from providers.base import Api, CompletionResult, CompletionStream, NativeRequest, Provider, UpstreamRequest

# (deployment, credential) -> the provider calling that deployment's upstream with that credential
ProviderWithCredential = Callable[[Deployment, str], Provider]


class AnswerRenderer(Protocol):
    """A client API bridged onto another at the edge (the Responses API onto chat): renders the
    pipeline's answer, plain, streamed or replayed from the cache, in its own shape."""

    @property
    def framing(self) -> Framing:
        """How its streams are written."""
        ...

    # `scope`: the client's, whose call it may settle while it stores the answer (`ClientScope.settle`).
    async def body(self, raw: bytes, scope: ClientScope) -> bytes: ...
    def stream(self, upstream: CompletionStream, scope: ClientScope) -> CompletionStream: ...
    async def replayed(self, payloads: list[bytes], scope: ClientScope) -> list[bytes]: ...


@dataclass(frozen=True, slots=True)
class PreparedCall:
    plan: RoutePlan
    payload: dict[str, Any]
    request_id: str
    stream: bool
    estimate: Estimate
    cache: CachePlan | None = None  # None: no cache policy applies (the route's first candidate has none)
    credential: Credential | None = None  # a virtual key's, for the deployments of its provider
    usage: Usage = field(default_factory=Usage)  # filled by the upstream call, read when settling limits
    response_headers: dict[str, str] = field(default_factory=dict)  # x-ratelimit-* and the like
    guarded: GuardedCall | None = None  # the output checks to apply, and the verdicts so far
    api: Api = "completions"  # the client API it came in on: the shape of its body and answer
    render: AnswerRenderer | None = None  # the answer re-rendered for a bridged client API; None: as it is
    native: NativeRequest | None = None  # the client's own body, for a provider that speaks its API

    def headers_from(self, deployment: Deployment, attempts: int) -> dict[str, str]:
        """Who answered after how many upstream calls, and this call's own response headers."""
        return {**served_by(deployment.name, deployment.provider_type, attempts), **self.response_headers}


@dataclass(frozen=True, slots=True)
class Served:
    """Who answered, after how many upstream calls."""

    deployment: Deployment
    attempts: int
    route: dict[str, str] = field(default_factory=dict)  # what the answer says of the route (candidates skipped)


class Pipeline:
    def __init__(
        self,
        gatekeeper: Gatekeeper,
        router: Router,
        deployments: dict[str, Deployment],
        runner: AttemptRunner,
        cache: ResponseCache | None = None,
        provider_with: ProviderWithCredential | None = None,
    ) -> None:
        self.gatekeeper = gatekeeper
        self.router = router
        self.deployments = deployments
        self.runner = runner
        self.cache = cache or ResponseCache(TieredCache())
        self._provider_with = provider_with
        # The client APIs some deployment speaks itself: a request on another is never given its
        # own body beside the chat view (`NativeRequest`).
        self.native_apis: frozenset[str] = frozenset().union(*(d.native_apis for d in deployments.values()))
        # The key directory's own method, bound once: the caller's key without two forwarding frames.
        self.authenticate: Callable[[Mapping[str, str]], Awaitable[KeyRecord]] = gatekeeper.keys.authenticate

    async def prepare(
        self,
        caller: KeyRecord,
        headers: Mapping[str, str],
        payload: dict[str, Any],
        request_id: str,
        api: Api = "completions",
        routed: Callable[[str, str], None] | None = None,
        render: AnswerRenderer | None = None,
        native: NativeRequest | None = None,
    ) -> PreparedCall:
        """Validate the body, plan the route and the cache, resolve a virtual key; raises the 4xx
        the client should get. `routed(deployment, provider type)` is told the route's first
        candidate as soon as it is chosen, so a later refusal (a guardrail) is known to be its.

        The cache policy is the route's first candidate's (members of a group share policies);
        the key names what the request resolved to and the caller's cache scope (its own key, or
        a namespace an admin gave several keys in the config file), so tenants never share."""
        context = pop_context(payload)  # the grounding document is for the guardrails, never sent upstream
        request: CompletionRequest | ChatRequest | EmbeddingsRequest
        if api == "completions":
            request = validate_completion(payload)
        elif api == "chat":
            request = validate_chat(payload)
        else:
            request = validate_embeddings(payload)
        plan = self.router.plan(headers, request.model, caller, api)
        first = plan.tiers[0].members[0]
        if routed is not None:
            routed(first.name, first.provider_type)
        guarded = None
        if first.guards is not None and api == "completions":
            guarded = await check_input(first.guards, payload, context, first.provider, caller.cache_scope)
        elif first.guards is not None and api == "chat":
            guarded = await check_chat_input(first.guards, payload, context, caller.cache_scope)
        elif first.guards is not None:
            guarded = await check_embeddings_input(first.guards, payload, first.provider, caller.cache_scope)
        if native is not None and guarded is not None and first.guards is not None:
            await redact_native(first.guards, guarded, payload, native)  # as the chat view was
        credential = await self.gatekeeper.credential(caller, headers, first)
        cache = None
        if first.cache is not None:
            # A body sent as it came is cached as it came: keyed by itself, its answer kept as it is.
            kept = None
            if native is not None and sends_native(first, native):
                kept = (native.api, native.body_for(first.name), native.headers, native.partition)
            cache = self.cache.plan(
                policy=first.cache,
                headers=headers,
                deployment=plan.target,
                scope=caller.cache_scope,
                request=request,
                native=kept,
            )
        stream = not isinstance(request, EmbeddingsRequest) and bool(request.stream)  # embeddings never stream
        estimated = estimate(request, payload)
        call = PreparedCall(
            plan,
            payload,
            request_id,
            stream,
            estimated,
            cache,
            credential,
            guarded=guarded,
            api=api,
            render=render,
            native=native,
        )
        if guarded is not None:
            call.response_headers.update(guarded.header())
        return call

    async def admit(self, caller: KeyRecord, call: PreparedCall) -> Admission:
        """429 unless the caller's and the deployment's limits and budget allow the call."""
        admission = await self.gatekeeper.admit(caller, call.plan.tiers[0].members[0], call.estimate)
        if admission.decision is not None:  # a rate limit applied: its x-ratelimit-* headers
            call.response_headers.update(admission.headers())
        return admission

    async def settle(self, admission: Admission, call: PreparedCall) -> None:
        await self.gatekeeper.settle(admission, call.usage)

    async def complete(self, call: PreparedCall) -> tuple[CompletionResult, Served]:
        async def attempt(deployment: Deployment, timeout_s: float) -> CompletionResult:
            provider = self.provider_for(deployment, call.credential)
            request = UpstreamRequest(call.payload, call.request_id, timeout_s, call.api, call.native)
            return await traced.complete(provider, deployment, request)

        outcome = await self.runner.run(call.plan, attempt)
        route = outcome.headers()
        if route:
            call.response_headers.update(route)
        await outcome.lease.succeeded()
        call.usage.record(outcome.value.body.get("usage"))
        result = outcome.value
        if call.guarded is not None and call.api != "embeddings":  # an embedding has no text to check
            if result.native:  # a deployment's own answer in the client's API: checked and rewritten as it is
                assert call.native is not None  # only a native request is answered natively
                result = await check_answer(call.guarded, result, call.native)
            else:
                checked = check_result if call.api == "completions" else check_chat_result
                result = await checked(call.guarded, result)
            call.response_headers.update(call.guarded.header())
        return result, Served(outcome.lease.deployment, outcome.attempts, route)

    async def open_stream(self, call: PreparedCall) -> tuple[CompletionStream, Served]:
        """Open a stream and wait for its first event: until then a failure can still be retried
        or moved to another deployment, since nothing has reached the client."""

        async def attempt(deployment: Deployment, timeout_s: float) -> _Opened:
            provider = self.provider_for(deployment, call.credential)
            # A bridged API reads every chunk: a relay hands its parse along (`ParsedPayloads`).
            parsed = call.render is not None
            request = UpstreamRequest(call.payload, call.request_id, timeout_s, call.api, call.native, parsed)
            stream = await traced.stream(provider, deployment, request)
            events = aiter(stream)
            try:
                first: list[bytes] = await anext(events, [])
            except BaseException:
                await stream.aclose()
                raise
            return _Opened(stream, events, first)

        outcome = await self.runner.run(call.plan, attempt)
        call.response_headers.update(outcome.headers())
        opened = outcome.value
        call.usage.prompt_tokens = call.estimate.prompt_tokens  # until the stream reports its own
        stream: CompletionStream = _TrackedStream(opened, outcome.lease, call.usage)
        if call.guarded is not None:
            if call.native is None or not sends_native(outcome.lease.deployment, call.native):
                stream = (GuardedStream if call.api == "completions" else ChatGuardedStream)(stream, call.guarded)
            elif call.guarded.output:  # the upstream's own events: read only when there are checks to make
                stream = guarded_stream(stream, call.guarded, call.native)
        return stream, Served(outcome.lease.deployment, outcome.attempts, outcome.headers())

    def provider_for(self, deployment: Deployment, credential: Credential | None) -> Provider:
        """The provider that calls `deployment`'s upstream with `credential` (a virtual key's, for
        deployments of its provider type) or, without one, with the deployment's own."""
        assert deployment.provider is not None  # the runner only tries deployments that have one
        if credential is None or credential.provider_type != deployment.provider_type or self._provider_with is None:
            return deployment.provider
        return self._provider_with(deployment, credential.value.get_secret_value())

    def models_for(self, principal: Principal) -> list[tuple[str, Deployment]]:
        """(model id, deployment) for every name and alias the caller may use and that can serve,
        each id once: a group's alias is listed with its first member (config order)."""
        models: dict[str, Deployment] = {}
        for deployment in self.deployments.values():
            if deployment.provider is not None and principal.may_use(deployment.name, deployment.tags):
                for model in self.router.names_for(deployment.name):
                    models.setdefault(model, deployment)
        return list(models.items())


@dataclass(frozen=True, slots=True)
class _Opened:
    stream: CompletionStream
    events: AsyncIterator[list[bytes]]
    first: list[bytes]


class _TrackedStream:
    """The upstream stream, its first event already read: metered into the call's `Usage` as it
    flows (also when cut short), and its outcome reported to the runner. One wrapper, not one
    per concern: every layer of async generators costs each read of the stream."""

    def __init__(self, opened: _Opened, lease: Lease, usage: Usage) -> None:
        self._opened = opened
        self._lease = lease
        self._usage = usage

    async def __aiter__(self) -> AsyncIterator[list[bytes]]:
        meter = self._usage.meter
        try:
            if self._opened.first:
                meter(self._opened.first)
                yield self._opened.first
            async for payloads in self._opened.events:
                meter(payloads)
                yield payloads
        except GatewayError as error:
            await self._lease.failed(error)
            raise
        await self._lease.succeeded()

    async def aclose(self) -> None:
        self._lease.abandoned()  # no-op when the stream already finished or failed
        stream = self._opened.stream
        await stream.aclose()
        # A UsageReportingStream's own figures (getattr: cheaper than a runtime protocol check);
        # None (a stream cut short) keeps what was counted.
        reported = getattr(stream, "reported_usage", None)
        if reported is not None:
            self._usage.record(reported())
