"""The limits as the request pipeline sees them: `admit` before the upstream call, `settle` after.

`admit` reserves the key's budget first (a refusal there takes nothing from the rate buckets),
then takes from the key's and the deployment's rate buckets in one atomic step; a rate refusal
gives the budget reservation back. `settle` charges the real usage and frees the slot. When the
store fails, `on_redis_error` decides: `open` serves without limits, `closed` answers 503.
"""

from __future__ import annotations

import itertools
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from policies.limits.budget import BudgetStore, Charge, Spend, to_pico
from policies.limits.decision import RateDecision
from policies.limits.errors import BudgetExceeded, LimitsUnavailable, RateLimited
from policies.limits.estimate import Estimate
from policies.limits.guard import STORE_FAILURES, FailureLog
from policies.limits.rate import RateLimiter, Scope
from policies.limits.specs import FREE, BudgetSpec, LimitSpec, LimitsSettings, Price

log = logging.getLogger(__name__)
T = TypeVar("T")
# Lease ids name a request's concurrency slot in Redis: unique across processes and replicas by a
# random per-process prefix, and a counter after it (uuid4 reads the OS entropy pool every time).
_LEASE_PREFIX = uuid.uuid4().hex[:16]
_lease_counter = itertools.count(1)


def _new_lease_id() -> str:
    return f"{_LEASE_PREFIX}{next(_lease_counter):x}"


_UNLIMITED = BudgetSpec()  # keys without a budget still have their usage counted, per 30 days


@dataclass(frozen=True, slots=True)
class Caller:
    """Who calls which deployment, with the limits of both (from the key record and the deployment)."""

    key: str | None  # None: an open gateway, no key limits or budget
    deployment: str
    key_limits: LimitSpec = field(default_factory=LimitSpec)
    budget: BudgetSpec | None = None
    deployment_limits: LimitSpec = field(default_factory=LimitSpec)
    price: Price = FREE


@dataclass(slots=True)
class Admission:
    caller: Caller
    estimate: Estimate
    lease: str
    scopes: list[Scope]
    decision: RateDecision | None  # None: no rate limits apply, or the store failed open
    window: int | None  # the budget period charged at settle (None: anonymous)
    reserved: bool
    settled: bool = False

    def headers(self) -> dict[str, str]:
        """`x-ratelimit-*` for the response (empty when no rate limit applies)."""
        return self.decision.headers() if self.decision is not None else {}


@dataclass(frozen=True, slots=True)
class KeyUsage:
    period: str
    period_start: float  # Unix seconds
    period_end: float
    spend: Spend
    budget: BudgetSpec


class Limits:
    def __init__(
        self,
        rate: RateLimiter,
        budgets: BudgetStore,
        settings: LimitsSettings | None = None,
        *,
        clock: Callable[[], float] = time.time,  # wall clock: budget periods are calendar windows
    ) -> None:
        self.settings = settings or LimitsSettings()
        self._rate = rate
        self._budgets = budgets
        self._clock = clock
        consequence = "serving without limits" if self.settings.on_redis_error == "open" else "refusing requests"
        self.failures = FailureLog(
            "rate limit / budget store", consequence, logger=log, interval_s=self.settings.log_interval_s
        )

    async def admit(self, caller: Caller, estimate: Estimate) -> Admission:
        """Raises BudgetExceeded or RateLimited (429), or LimitsUnavailable (503, fail-closed only)."""
        scopes = _scopes(caller)
        admission = Admission(caller, estimate, _new_lease_id(), scopes, None, None, reserved=False)
        if caller.key is not None:
            budget = caller.budget or _UNLIMITED
            admission.window = budget.window(self._clock())[0]
            if budget.limited:
                await self._reserve(admission, caller.key, budget, admission.window)
        if scopes:
            try:
                decision = await self._guarded(self._rate.acquire(scopes, estimate.total, admission.lease), None)
            except LimitsUnavailable:
                admission.scopes = []
                await self.settle(admission, prompt_tokens=0, completion_tokens=0)  # give the reservation back
                raise
            admission.decision = decision
            if decision is not None and decision.refusal is not None:
                admission.scopes = []  # nothing was taken from the buckets
                await self.settle(admission, prompt_tokens=0, completion_tokens=0)
                raise RateLimited.from_decision(decision, decision.refusal)
        return admission

    async def settle(self, admission: Admission, *, prompt_tokens: int, completion_tokens: int) -> None:
        """The call ended (or failed, or the client left): charge what it really used. Idempotent.
        For a stream cut short, pass the usage counted so far; for a call that never reached the
        upstream, zeros."""
        if admission.settled:
            return
        admission.settled = True
        caller, used = admission.caller, prompt_tokens + completion_tokens
        if any(scope.limits.tpm or scope.limits.concurrent for scope in admission.scopes):
            delta = used - admission.estimate.total
            await self._guarded(self._rate.finish(admission.scopes, admission.lease, delta), None, may_refuse=False)
        if caller.key is not None and admission.window is not None:
            charge = Charge(used, to_pico(caller.price.cost(prompt_tokens, completion_tokens)))
            reservation = admission.lease if admission.reserved else ""
            budget = caller.budget or _UNLIMITED
            settle = self._budgets.settle(caller.key, budget, admission.window, reservation, charge)
            await self._guarded(settle, None, may_refuse=False)

    async def usage(self, key: str, budget: BudgetSpec | None) -> KeyUsage:
        """This key's spend in the current period. Raises the store's error: the admin API reports it."""
        budget = budget or _UNLIMITED
        window, start, end = budget.window(self._clock())
        spend = await self._budgets.spend(key, budget, window)
        return KeyUsage(period=budget.period, period_start=start, period_end=end, spend=spend, budget=budget)

    async def _reserve(self, admission: Admission, key: str, budget: BudgetSpec, window: int) -> None:
        caller, estimate = admission.caller, admission.estimate
        charge = Charge(estimate.total, to_pico(caller.price.cost(estimate.prompt_tokens, estimate.completion_tokens)))
        reserve = self._budgets.reserve(key, budget, window, charge, admission.lease)
        decision = await self._guarded(reserve, None)
        if decision is None:
            return  # failed open
        if decision.refused is not None:
            renews_in = budget.window(self._clock())[2] - self._clock()
            raise BudgetExceeded.for_key(key, budget, decision.refused, renews_in)
        admission.reserved = True

    async def _guarded(self, operation: Awaitable[T], fallback: T, *, may_refuse: bool = True) -> T:
        """A store call; on failure, `fallback` (fail open) or 503 (fail closed, before the call only:
        after it the answer is already given, and a lost charge is only logged)."""
        try:
            return await operation
        except STORE_FAILURES as exc:
            self.failures.failed(exc)
            if may_refuse and self.settings.on_redis_error == "closed":
                raise LimitsUnavailable() from None
            return fallback


def _scopes(caller: Caller) -> list[Scope]:
    scopes = []
    if caller.key is not None and not caller.key_limits.empty:
        scopes.append(Scope("key", caller.key, caller.key_limits))
    if not caller.deployment_limits.empty:
        scopes.append(Scope("deployment", caller.deployment, caller.deployment_limits))
    return scopes
