"""Run one request's upstream attempts along its route plan: balance, retry, fall back, break circuits.

Order within a tier: members not yet tried in this request (chosen by the tier's strategy),
then members that failed and still have retries left, after a jittered exponential backoff (or
the upstream's Retry-After, up to a cap). When a tier is spent, the next tier (a fallback) is
tried at once. A member whose circuit is open is skipped; if every candidate of the plan is open,
the one that opened longest ago is tried rather than none. A member that cannot serve (its
credential is not set) is never tried. Only retryable failures (connection errors, timeouts,
408/429/5xx) move on; any other error is the answer.

Members passed over (cannot serve, or circuit open and not tried) are reported with the answer,
success or failure, in `x-gateway-skipped`; when none of the candidates can serve, the answer is
503 `deployment_unavailable` naming each one and the environment variable it lacks.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from gateway.api.errors import DeploymentUnavailable, GatewayError
from gateway.api.response_headers import ATTEMPTS, DEPLOYMENT, PROVIDER, SKIPPED, skipped_value
from gateway.config.routing import RoutingConfig
from gateway.routing.breaker import CircuitBreakers
from gateway.routing.deployments import CIRCUIT_OPEN, Deployment, StatsBoard, Unavailable
from gateway.routing.events import RoutingEvents
from gateway.routing.plan import RoutePlan, Tier
from gateway.routing.retries import backoff_s, counts_against_deployment, is_retryable, retry_after_s
from gateway.routing.strategies import Balancer

T = TypeVar("T")
Call = Callable[[Deployment, float], Awaitable[T]]  # (deployment, timeout_s) -> result


@dataclass(slots=True)
class Timing:
    """Clocks, sleep and randomness, injectable so tests can check backoff without waiting."""

    clock: Callable[[], float] = time.monotonic
    wall: Callable[[], float] = time.time  # for HTTP-date Retry-After values
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    rng: random.Random = field(default_factory=random.Random)


class Lease:
    """One attempt's hold on a deployment: counted in flight until released, once."""

    def __init__(self, deployment: Deployment, runner: AttemptRunner) -> None:
        self.deployment = deployment
        self._runner = runner
        self._stats = runner.stats[deployment.name]
        self._started = runner.timing.clock()
        self._released = False
        self._stats.in_flight += 1

    def first_byte(self) -> None:
        """The answer (or a stream's first event) arrived: what the lowest-latency strategy measures."""
        self._stats.record_latency(self._runner.timing.clock() - self._started)

    async def succeeded(self) -> None:
        if self._release():
            await self._runner.breakers.record(self.deployment.name, ok=True)

    async def failed(self, error: GatewayError) -> None:
        if self._release():
            # An upstream that answers "bad request" is up: for the breaker that is a success.
            await self._runner.breakers.record(self.deployment.name, ok=not counts_against_deployment(error))

    def abandoned(self) -> None:
        """The client went away: neither a success nor the deployment's fault."""
        self._release()

    def _release(self) -> bool:
        if self._released:
            return False
        self._released = True
        self._stats.in_flight -= 1
        return True


@dataclass(frozen=True, slots=True)
class Outcome(Generic[T]):
    value: T
    lease: Lease  # still held when the caller has more to do (a stream to relay)
    attempts: int
    skipped: dict[str, str] = field(default_factory=dict)  # deployment -> why it was passed over

    def headers(self) -> dict[str, str]:
        """What the answer says about the route besides who served it: the members passed over."""
        return {SKIPPED: skipped_value(self.skipped)} if self.skipped else {}


@dataclass(slots=True)
class _Progress:
    """What one request has tried so far."""

    deadline: float
    attempts: int = 0
    failures: dict[str, int] = field(default_factory=dict)  # a plain dict: a Counter costs three calls more
    errors: dict[str, GatewayError] = field(default_factory=dict)
    spent: set[str] = field(default_factory=set)  # no retries left, or Retry-After too long
    blocked: set[str] = field(default_factory=set)  # circuit open
    last: tuple[Deployment, GatewayError] | None = None
    # Candidates passed over, in order: cannot serve (its Unavailable code), or circuit open before any attempt.
    skipped: dict[str, tuple[Deployment, str]] = field(default_factory=dict)

    def skip(self, deployment: Deployment, reason: str) -> None:
        self.skipped.setdefault(deployment.name, (deployment, reason))

    def reasons(self) -> dict[str, str]:
        if not self.skipped:  # the usual case: not worth a comprehension
            return {}
        return {name: reason for name, (_, reason) in self.skipped.items()}

    def unserving(self) -> list[tuple[str, Unavailable]]:
        """The candidates passed over because they cannot serve, with why."""
        found = [(d.name, d.unavailability()) for d, reason in self.skipped.values() if reason != CIRCUIT_OPEN]
        return [(name, why) for name, why in found if why is not None]


class AttemptRunner:
    def __init__(
        self,
        routing: RoutingConfig,
        breakers: CircuitBreakers,
        stats: StatsBoard,
        events: RoutingEvents,
        timing: Timing,
    ) -> None:
        self.routing = routing
        self.breakers = breakers
        self.stats = stats
        self.events = events
        self.timing = timing
        self._balancer = Balancer(stats, timing.rng)

    async def run(self, plan: RoutePlan, call: Call[T]) -> Outcome[T]:
        """Attempts along the plan until one succeeds; raises the last failure (with the
        `x-gateway-attempts` and `x-gateway-deployment` headers set) when none does."""
        progress = _Progress(deadline=self.timing.clock() + self.routing.deadline_s)
        for passed, reason in plan.passed_over:  # left out of the plan (the request's API)
            progress.skip(passed, reason)
        for tier in plan.tiers:
            while progress.attempts < self.routing.max_attempts:
                deployment = await self._choose(tier, progress)
                if deployment is None:
                    break
                if not await self._wait_for_turn(deployment, progress):
                    continue
                outcome = await self._attempt(deployment, call, progress)
                if outcome is not None:
                    return outcome
        if progress.attempts == 0 and progress.blocked:
            # Every candidate's circuit is open: try the one that opened longest ago, not none.
            oldest = min(progress.blocked, key=self.breakers.opened_at)
            deployment = next(d for tier in plan.tiers for d in tier.members if d.name == oldest)
            progress.skipped.pop(oldest, None)  # tried after all
            outcome = await self._attempt(deployment, call, progress)
            if outcome is not None:
                return outcome
        raise self._failure(plan, progress)

    async def _choose(self, tier: Tier, progress: _Progress) -> Deployment | None:
        usable = []
        for d in tier.members:
            why = d.unavailability()
            if why is not None:
                progress.skip(d, why.code)
            elif d.name not in progress.spent and d.name not in progress.blocked:
                usable.append(d)
        while usable:
            if len(usable) == 1:  # nothing to balance (a single deployment, or the last left)
                chosen = usable[0]
            else:
                untried = [d for d in usable if not progress.failures.get(d.name)]
                chosen = self._balancer.pick(tier.strategy, tier.key, tier.members, untried or usable)
            if await self.breakers.admit(chosen.name, probe_s=chosen.timeout_s):
                return chosen
            progress.blocked.add(chosen.name)
            if not progress.failures.get(chosen.name):  # one this request tried and then opened is not "skipped"
                progress.skip(chosen, CIRCUIT_OPEN)
            usable.remove(chosen)
        return None

    async def _wait_for_turn(self, deployment: Deployment, progress: _Progress) -> bool:
        """Back off before trying a deployment again; False when it should not be retried now."""
        failures = progress.failures.get(deployment.name, 0)
        if not failures:
            if progress.last is not None:
                self.events.fallbacks[progress.last[0].name, deployment.name] += 1
            return True
        delay = backoff_s(self.routing.backoff, failures, self.timing.rng)
        asked = retry_after_s(progress.errors[deployment.name], self.timing.wall())
        if asked is not None:
            if asked > self.routing.backoff.retry_after_max_s:
                progress.spent.add(deployment.name)
                return False
            delay = max(delay, asked)
        if self.timing.clock() + delay >= progress.deadline:
            progress.spent.add(deployment.name)
            return False
        self.events.retries[deployment.name] += 1
        await self.timing.sleep(delay)
        return True

    async def _attempt(self, deployment: Deployment, call: Call[T], progress: _Progress) -> Outcome[T] | None:
        remaining = progress.deadline - self.timing.clock()
        if remaining <= 0:
            progress.spent.add(deployment.name)
            return None
        progress.attempts += 1
        lease = Lease(deployment, self)
        try:
            value = await call(deployment, min(deployment.timeout_s, remaining))
        except GatewayError as error:
            await lease.failed(error)
            self.events.upstream_error(deployment.name, error)
            retryable = is_retryable(error)
            self.events.attempts[deployment.name, "retryable" if retryable else "fatal"] += 1
            if not retryable:
                raise _annotated(error, deployment, progress) from None
            progress.failures[deployment.name] = progress.failures.get(deployment.name, 0) + 1
            progress.errors[deployment.name] = error
            progress.last = (deployment, error)
            if progress.failures[deployment.name] > deployment.retries:
                progress.spent.add(deployment.name)
            return None
        except BaseException:
            lease.abandoned()
            raise
        lease.first_byte()
        self.events.attempts[deployment.name, "ok"] += 1
        return Outcome(value, lease, progress.attempts, progress.reasons())

    def _failure(self, plan: RoutePlan, progress: _Progress) -> GatewayError:
        if progress.last is not None:
            deployment, error = progress.last
            return _annotated(error, deployment, progress)
        return _unavailable(plan, progress)


def _annotated(error: GatewayError, deployment: Deployment, progress: _Progress) -> GatewayError:
    """The last failure, as the answer: who failed after how many calls, and who was passed over.
    A gateway-side failure (5xx) also says in words which candidates cannot serve and what to set."""
    error.headers[DEPLOYMENT] = deployment.name
    error.headers[PROVIDER] = deployment.provider_type
    error.headers[ATTEMPTS] = str(progress.attempts)
    if progress.skipped:
        error.headers[SKIPPED] = skipped_value(progress.reasons())
    unserving = progress.unserving()
    if unserving and error.status >= 500:
        notes = " ".join(f"Deployment '{name}' was skipped: {why.reason}. {why.remedy}" for name, why in unserving)
        error.message = f"{error.message} {notes}"
    return error


def _unavailable(plan: RoutePlan, progress: _Progress) -> DeploymentUnavailable:
    """No attempt was made: every candidate cannot serve. 503 naming each and what to set."""
    first = plan.tiers[0].members[0]
    headers = {DEPLOYMENT: first.name, PROVIDER: first.provider_type, ATTEMPTS: "0"}
    if progress.skipped:
        headers[SKIPPED] = skipped_value(progress.reasons())
    unserving = progress.unserving()
    if len(unserving) == 1:
        name, why = unserving[0]
        message = why.message(name)
    elif unserving:
        reasons = " ".join(f"Deployment '{name}' cannot serve: {why.reason}." for name, why in unserving)
        remedies = " ".join(dict.fromkeys(why.remedy for _, why in unserving))
        message = f"No deployment for the {plan.asked} can serve. {reasons} {remedies}"
    else:  # the deadline ran out before a first attempt
        message = f"No deployment for the {plan.asked} could be tried within routing.deadline_s."
    return DeploymentUnavailable(message, headers=headers)
