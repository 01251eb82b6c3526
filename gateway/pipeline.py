"""The one object that owns the order of a completion request: auth, validate, route, call.

HTTP handlers stay thin (read the body, call the pipeline, render), so the flow is testable
without a socket and later stages (guardrails, limits) slot in here in one place. The cache's
plan is made here; its lookup and fill wrap `complete` / `open_stream` in `gateway.cached`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

from gateway.attempts import AttemptRunner, Lease
from gateway.auth import KeyAuthenticator, Principal
from gateway.deployments import Deployment
from gateway.errors import GatewayError
from gateway.request_parsing import validate_completion
from gateway.routing import RoutePlan, Router
from policies.cache import CachePlan, ResponseCache, TieredCache
from providers.base import CompletionResult, CompletionStream, UpstreamRequest


@dataclass(frozen=True, slots=True)
class PreparedCall:
    plan: RoutePlan
    payload: dict[str, Any]
    request_id: str
    stream: bool
    cache: CachePlan | None = None  # None: no cache policy applies (the route's first candidate has none)


@dataclass(frozen=True, slots=True)
class Served:
    """Who answered, after how many upstream calls."""

    deployment: Deployment
    attempts: int


class Pipeline:
    def __init__(
        self,
        authenticator: KeyAuthenticator,
        router: Router,
        deployments: dict[str, Deployment],
        runner: AttemptRunner,
        cache: ResponseCache | None = None,
    ) -> None:
        self.authenticator = authenticator
        self.router = router
        self.deployments = deployments
        self.runner = runner
        self.cache = cache or ResponseCache(TieredCache())

    def authenticate(self, headers: Mapping[str, str]) -> Principal:
        return self.authenticator.authenticate(headers)

    def prepare(
        self, principal: Principal, headers: Mapping[str, str], payload: dict[str, Any], request_id: str
    ) -> PreparedCall:
        """Validate the body, plan the route and the cache; raises the 4xx the client should get.

        The cache policy is the route's first candidate's (members of a group share policies);
        the key names what the request resolved to and the caller's key, so tenants never share."""
        request = validate_completion(payload)
        plan = self.router.plan(headers, request.model, principal)
        policy = plan.tiers[0].members[0].cache
        cache = None
        if policy is not None:
            scope = principal.name or ""
            cache = self.cache.plan(
                policy=policy, headers=headers, deployment=plan.target, scope=scope, request=request
            )
        return PreparedCall(plan, payload, request_id, bool(request.stream), cache)

    async def complete(self, call: PreparedCall) -> tuple[CompletionResult, Served]:
        async def attempt(deployment: Deployment, timeout_s: float) -> CompletionResult:
            assert deployment.provider is not None  # the runner only tries deployments that have one
            return await deployment.provider.complete(UpstreamRequest(call.payload, call.request_id, timeout_s))

        outcome = await self.runner.run(call.plan, attempt)
        await outcome.lease.succeeded()
        return outcome.value, Served(outcome.lease.deployment, outcome.attempts)

    async def open_stream(self, call: PreparedCall) -> tuple[CompletionStream, Served]:
        """Open a stream and wait for its first event: until then a failure can still be retried
        or moved to another deployment, since nothing has reached the client."""

        async def attempt(deployment: Deployment, timeout_s: float) -> _Opened:
            assert deployment.provider is not None
            stream = await deployment.provider.stream(UpstreamRequest(call.payload, call.request_id, timeout_s))
            events = aiter(stream)
            try:
                first: list[bytes] = await anext(events, [])
            except BaseException:
                await stream.aclose()
                raise
            return _Opened(stream, events, first)

        outcome = await self.runner.run(call.plan, attempt)
        opened = outcome.value
        tracked = _TrackedStream(opened, outcome.lease)
        return tracked, Served(outcome.lease.deployment, outcome.attempts)

    def models_for(self, principal: Principal) -> list[tuple[str, Deployment]]:
        """(model id, deployment) for every name and alias the caller may use and that can serve."""
        return [
            (model, deployment)
            for deployment in self.deployments.values()
            if deployment.provider is not None and principal.may_use(deployment.name)
            for model in self.router.names_for(deployment.name)
        ]


@dataclass(frozen=True, slots=True)
class _Opened:
    stream: CompletionStream
    events: AsyncIterator[list[bytes]]
    first: list[bytes]


class _TrackedStream:
    """The upstream stream, its first event already read; reports the outcome to the runner."""

    def __init__(self, opened: _Opened, lease: Lease) -> None:
        self._opened = opened
        self._lease = lease

    async def __aiter__(self) -> AsyncIterator[list[bytes]]:
        try:
            if self._opened.first:
                yield self._opened.first
            async for payloads in self._opened.events:
                yield payloads
        except GatewayError as error:
            await self._lease.failed(error)
            raise
        await self._lease.succeeded()

    async def aclose(self) -> None:
        self._lease.abandoned()  # no-op when the stream already finished or failed
        await self._opened.stream.aclose()
