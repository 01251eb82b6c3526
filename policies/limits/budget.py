"""Budgets: tokens and cost a key may spend per period, reserved before a call and settled after.

Admission rule: a request is admitted only if its estimate (tokens, and cost at the deployment's
price) fits in what remains: spend plus what is reserved for requests in flight plus this estimate
stays within the budget, and something remains at all. Check and reservation are one atomic step
(one Lua script in Redis, no await in memory), so concurrent requests cannot overshoot: with
estimates that bound the real usage, the spend never passes the budget. Settling replaces the
reservation with the real usage (a call that used more than its estimate, e.g. a prompt longer
than its ~4-characters-a-token estimate, is still charged in full). A reservation whose call never
settles (a crashed worker) expires after the lease TTL. Cost is kept in whole pico-dollars
(1e-12 USD) so that Redis adds integers exactly; every figure is bounded (`CHARGE_MAX`, and the
budget's own bounds in `specs`) so that no sum can overflow Redis's 64-bit integers.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

from policies.limits.specs import BudgetSpec

PICO = 1_000_000_000_000
# The most one call may reserve or be charged, in tokens or pico-dollars: a larger figure is
# clamped to it (and then fits no budget, whose bounds are far below). Totals saturate at twice it.
CHARGE_MAX = 2**61


def to_pico(usd: float) -> int:
    return round(usd * PICO)


def clamp(figure: float) -> int:
    """A count bound for Redis: whole, non-negative, at most CHARGE_MAX."""
    return int(min(max(figure, 0), CHARGE_MAX))


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


def refusal(budget: BudgetSpec, spend: Spend, charge: Charge) -> Literal["tokens", "cost"] | None:
    """Which budget `charge` does not fit in, given `spend` (None: it fits). Nothing left also
    refuses a request estimated at zero. The Redis script applies the same rule."""
    if budget.tokens is not None and not _fits(spend.tokens + spend.reserved_tokens, charge.tokens, budget.tokens):
        return "tokens"
    if budget.cost_usd is not None:
        committed = spend.cost_pico + spend.reserved_cost_pico
        if not _fits(committed, charge.cost_pico, to_pico(budget.cost_usd)):
            return "cost"
    return None


def _fits(committed: int, wanted: int, limit: int) -> bool:
    return committed < limit and committed + wanted <= limit


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
        refused = refusal(budget, before, charge)
        if refused is None:
            period.leases[reservation] = (charge, self._clock() + self._lease_ttl_s)
        return BudgetDecision(refused=refused, window=window, spend=before)

    async def settle(self, key: str, budget: BudgetSpec, window: int, reservation: str, charge: Charge) -> None:
        period = self._period(key, budget, window)
        period.leases.pop(reservation, None)
        period.tokens = min(period.tokens + charge.tokens, 2 * CHARGE_MAX)  # saturates, as Redis's script does
        period.cost_pico = min(period.cost_pico + charge.cost_pico, 2 * CHARGE_MAX)

    async def spend(self, key: str, budget: BudgetSpec, window: int) -> Spend:
        return self._period(key, budget, window).spend()

    def _period(self, key: str, budget: BudgetSpec, window: int) -> _Period:
        name = f"{key}:{budget.store_name}"  # a key whose period (or its zone) changes starts afresh
        period = self._periods.get((name, window))
        if period is None:
            for stale in [k for k in self._periods if k[0] == name and k[1] < window]:
                del self._periods[stale]
            period = self._periods[(name, window)] = _Period()
        if period.leases:  # expired reservations: their requests never settled
            now = self._clock()
            period.leases = {lease: held for lease, held in period.leases.items() if held[1] > now}
        return period
