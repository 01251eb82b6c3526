"""Budgets: tokens and cost a key may spend per period, reserved before a call and settled after.

Admission rule: a request is admitted while the key's spend plus what is reserved for requests in
flight is below the budget ("once spent, refused"). It then reserves its estimate. So concurrent
requests cannot all slip through on a stale total: the overshoot is bounded by the requests in
flight when the budget ran out, and every call is charged its real usage at the end, even past
the budget (a stream that ends past it is charged in full). A reservation whose call never
settles (a crashed worker) expires after the lease TTL. Cost is kept in whole pico-dollars
(1e-12 USD) so that Redis adds integers exactly.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

from policies.limits.specs import BudgetSpec

PICO = 1_000_000_000_000


def to_pico(usd: float) -> int:
    return round(usd * PICO)


@dataclass(frozen=True, slots=True)
class Spend:
    """One key's figures in one period."""

    tokens: int = 0
    cost_pico: int = 0
    reserved_tokens: int = 0
    reserved_cost_pico: int = 0

    @property
    def cost_usd(self) -> float:
        return self.cost_pico / PICO

    @property
    def reserved_cost_usd(self) -> float:
        return self.reserved_cost_pico / PICO


@dataclass(frozen=True, slots=True)
class BudgetDecision:
    refused: Literal["tokens", "cost"] | None
    window: int  # the period's index: settle charges that period
    spend: Spend  # before this request's reservation


@dataclass(frozen=True, slots=True)
class Charge:
    tokens: int
    cost_pico: int


class BudgetStore(Protocol):
    async def reserve(
        self, key: str, budget: BudgetSpec, window: int, charge: Charge, reservation: str
    ) -> BudgetDecision: ...

    async def settle(self, key: str, budget: BudgetSpec, window: int, reservation: str, charge: Charge) -> None:
        """Drop the reservation (if still held) and add the real usage. `reservation` may be ""."""

    async def spend(self, key: str, budget: BudgetSpec, window: int) -> Spend: ...


def refusal(budget: BudgetSpec, spend: Spend) -> Literal["tokens", "cost"] | None:
    if budget.tokens is not None and spend.tokens + spend.reserved_tokens >= budget.tokens:
        return "tokens"
    if budget.cost_usd is not None and spend.cost_pico + spend.reserved_cost_pico >= to_pico(budget.cost_usd):
        return "cost"
    return None


@dataclass(slots=True)
class _Period:
    tokens: int = 0
    cost_pico: int = 0
    leases: dict[str, tuple[Charge, float]] = field(default_factory=dict)  # id -> (reserved, expiry)

    def spend(self) -> Spend:
        reserved_tokens = sum(charge.tokens for charge, _ in self.leases.values())
        reserved_cost = sum(charge.cost_pico for charge, _ in self.leases.values())
        return Spend(self.tokens, self.cost_pico, reserved_tokens, reserved_cost)


class MemoryBudgetStore:
    """This process's budgets; periods other than the current one are dropped as time moves on."""

    def __init__(self, *, lease_ttl_s: float = 900.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._lease_ttl_s = lease_ttl_s
        self._clock = clock
        self._periods: dict[tuple[str, int], _Period] = {}

    async def reserve(
        self, key: str, budget: BudgetSpec, window: int, charge: Charge, reservation: str
    ) -> BudgetDecision:
        period = self._period(key, budget, window)
        before = period.spend()
        refused = refusal(budget, before)
        if refused is None:
            period.leases[reservation] = (charge, self._clock() + self._lease_ttl_s)
        return BudgetDecision(refused=refused, window=window, spend=before)

    async def settle(self, key: str, budget: BudgetSpec, window: int, reservation: str, charge: Charge) -> None:
        period = self._period(key, budget, window)
        period.leases.pop(reservation, None)
        period.tokens += charge.tokens
        period.cost_pico += charge.cost_pico

    async def spend(self, key: str, budget: BudgetSpec, window: int) -> Spend:
        return self._period(key, budget, window).spend()

    def _period(self, key: str, budget: BudgetSpec, window: int) -> _Period:
        name = f"{key}:{budget.period}"  # a key whose period changes starts afresh
        period = self._periods.get((name, window))
        if period is None:
            for stale in [k for k in self._periods if k[0] == name and k[1] < window]:
                del self._periods[stale]
            period = self._periods[(name, window)] = _Period()
        now = self._clock()
        period.leases = {lease: held for lease, held in period.leases.items() if held[1] > now}
        return period
