"""The limits as the request pipeline sees them: `admit` before the upstream call, `settle` after.

`admit` reserves the request's estimate against the key's budget first (a refusal there takes
nothing from the rate buckets), then takes from the key's and the deployment's rate buckets in one
atomic step; a rate refusal gives the budget reservation back. `settle` replaces the reservation
with the real usage and frees the slot. Every figure sent to the store is clamped (`budget.clamp`).

When the store fails: an outage (Redis refused the connection or did not answer in time, see
`guard.is_outage`) is for `on_redis_error` to decide: `open` serves without limits, `closed`
answers 503. Any other failure (a script error, a reply that makes no sense, no free connection in
this process's pool) is never an admission: 503, whatever that setting.
"""

from __future__ import annotations

import itertools
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from policies.limits.budget import PICO, BudgetDecision, BudgetStore, Charge, Spend, clamp, to_pico
from policies.limits.decision import RateDecision
from policies.limits.errors import BudgetExceeded, LimitsUnavailable, RateLimited, RequestTooLarge
from policies.limits.estimate import Estimate
from policies.limits.guard import FailureLog, is_outage
from policies.limits.rate import RateLimiter, Scope, too_large
from policies.limits.specs import FREE, NO_LIMITS, BudgetSpec, LimitSpec, LimitsSettings, Price

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
        interval = self.settings.log_interval_s
        self.failures = FailureLog("rate limit / budget store", consequence, logger=log, interval_s=interval)
        # Failures that are not an outage: never served without limits.
        self.faults = FailureLog(
            "rate limit / budget store (an error, not an outage)", "refusing requests", logger=log, interval_s=interval
        )

    async def admit(self, caller: Caller, estimate: Estimate) -> Admission:
        """Raises BudgetExceeded, RateLimited or RequestTooLarge (429), or LimitsUnavailable (503)."""
        scopes = _scopes(caller)
        for scope in scopes:  # no bucket could ever hold it: refused from the config alone, store untouched
            if scope.limits.tpm is not None and clamp(estimate.total) > scope.limits.tpm:
                refusal = too_large(scope, scope.limits.tpm)
                raise RequestTooLarge.for_request(RateDecision(refusal=refusal), refusal, estimate.total)
        budget = caller.budget or _UNLIMITED
        # A lease names what this request holds in the store (a budget reservation, a concurrency
        # slot); a request that holds nothing needs none.
        lease = _new_lease_id() if scopes or budget.limited else ""
        admission = Admission(caller, estimate, lease, scopes, None, None, reserved=False)
        if caller.key is not None:
            admission.window = budget.window(self._clock())[0]
            if budget.limited:
                await self._reserve(admission, caller.key, budget, admission.window)
        if scopes:
            try:
                acquire = self._rate.acquire(scopes, clamp(estimate.total), admission.lease)
                decision = await self._guarded(acquire, None)
            except LimitsUnavailable:
                admission.scopes = []
                await self.settle(admission, prompt_tokens=0, completion_tokens=0)  # give the reservation back
                raise
            admission.decision = decision
            if decision is not None and decision.refusal is not None:
                admission.scopes = []  # nothing was taken from the buckets
                await self.settle(admission, prompt_tokens=0, completion_tokens=0)
                if not decision.refusal.fits:
                    raise RequestTooLarge.for_request(decision, decision.refusal, estimate.total)
                raise RateLimited.from_decision(decision, decision.refusal)
        return admission

    async def settle(
        self,
        admission: Admission,
        *,
        prompt_tokens: int,
        completion_tokens: int,
        cached_tokens: int = 0,
        cache_write_tokens: int = 0,
    ) -> None:
        """The call ended (or failed, or the client left): charge what it really used. Idempotent.
        For a stream cut short, pass the usage counted so far; for a call that never reached the
        upstream, zeros. `cached_tokens`: of the prompt tokens, those the upstream read from its
        prompt cache (at the deployment's cached price, as the answer's cost header states);
        `cache_write_tokens` those it wrote to it (at the cache-write price)."""
        if admission.settled:
            return
        admission.settled = True
        caller = admission.caller
        prompt_tokens, completion_tokens = clamp(prompt_tokens), clamp(completion_tokens)  # as the upstream said
        if admission.scopes and any(scope.limits.tpm or scope.limits.concurrent for scope in admission.scopes):
            estimated = clamp(admission.estimate.total)
            finish = self._rate.finish(
                admission.scopes, admission.lease, clamp(prompt_tokens + completion_tokens) - estimated, estimated
            )
            await self._guarded(finish, None, may_refuse=False)
        if caller.key is not None and admission.window is not None:
            written = clamp(cache_write_tokens) if cache_write_tokens else 0  # most answers write no cache
            charge = _charge(caller, prompt_tokens, completion_tokens, clamp(cached_tokens), written)
            # Also when the reservation's answer was lost (a timeout, failed open): the script may have
            # reserved, and dropping a reservation that is not there does nothing.
            reservation = admission.lease if admission.reserved or (caller.budget and caller.budget.limited) else ""
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
        estimate = admission.estimate
        charge = _charge(admission.caller, estimate.prompt_tokens, estimate.completion_tokens)
        reserve = self._budgets.reserve(key, budget, window, charge, admission.lease)
        decision = await self._guarded(reserve, None)
        if decision is None:
            return  # an outage, failed open
        if decision.refused is not None:
            now = self._clock()
            renews_in = budget.window(now)[2] - now
            wanted, left = _shortfall(budget, decision, charge)
            raise BudgetExceeded.for_key(key, budget, decision.refused, renews_in, wanted=wanted, left=left)
        admission.reserved = True

    async def _guarded(self, operation: Awaitable[T], fallback: T, *, may_refuse: bool = True) -> T:
        """A store call. On an outage, `fallback` (fail open) or 503 (fail closed); on any other
        failure, 503 whatever `on_redis_error` says. Only before the call (`may_refuse`): after it
        the answer is already given, and a lost charge is only counted and logged."""
        try:
            return await operation
        except Exception as exc:  # a failing check must never read as an admission
            if not is_outage(exc):
                self.faults.failed(exc)
                if may_refuse:
                    raise LimitsUnavailable() from None
                return fallback
            self.failures.failed(exc)
            if may_refuse and self.settings.on_redis_error == "closed":
                raise LimitsUnavailable() from None
            return fallback


def _charge(
    caller: Caller, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0, cache_write_tokens: int = 0
) -> Charge:
    if caller.price is FREE:  # no price configured: nothing to work out
        return Charge(clamp(prompt_tokens + completion_tokens), 0)
    cost_1m = caller.price.cost_per_1m(prompt_tokens, completion_tokens, cached_tokens, cache_write_tokens)
    cost = to_pico(cost_1m / 1_000_000)
    return Charge(clamp(prompt_tokens + completion_tokens), clamp(cost))


def _shortfall(budget: BudgetSpec, decision: BudgetDecision, charge: Charge) -> tuple[str, str]:
    """(this request's estimate, what is left) in the refusing budget's unit; ("", "") when nothing is left."""
    spend = decision.spend
    if decision.refused == "tokens" and budget.tokens is not None:
        left = budget.tokens - spend.tokens - spend.reserved_tokens
        return (f"{charge.tokens} tokens", f"{left} tokens") if left > 0 else ("", "")
    if decision.refused == "cost" and budget.cost_usd is not None:
        left = to_pico(budget.cost_usd) - spend.cost_pico - spend.reserved_cost_pico
        return (_usd(charge.cost_pico), _usd(left)) if left > 0 else ("", "")
    return "", ""


def _usd(pico: int) -> str:
    return "$" + f"{pico / PICO:.10f}".rstrip("0").rstrip(".")


def _scopes(caller: Caller) -> list[Scope]:
    scopes = []
    if caller.key is not None and not caller.key_limits.empty:
        scopes.append(Scope("key", caller.key, caller.key_limits))
    if caller.deployment_limits is not NO_LIMITS and not caller.deployment_limits.empty:  # the usual: none
        scopes.append(Scope("deployment", caller.deployment, caller.deployment_limits))
    return scopes
