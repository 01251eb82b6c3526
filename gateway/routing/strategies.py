"""Load-balancing strategies: which member of a group serves the next attempt."""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence

from gateway.config.routing import Strategy
from gateway.routing.deployments import Deployment, StatsBoard


class Balancer:
    """Picks one of several candidates by a strategy; state (round-robin turns) lives here."""

    def __init__(self, stats: StatsBoard, rng: random.Random) -> None:
        self._stats = stats
        self._rng = rng
        self._turns: dict[tuple[str, ...], itertools.count[int]] = {}

    def pick(
        self,
        strategy: Strategy,
        turn_key: tuple[str, ...],
        group: Sequence[Deployment],
        candidates: Sequence[Deployment],
    ) -> Deployment:
        """`group`: every member (round robin turns over all of them, keyed by `turn_key`);
        `candidates`: those still eligible for this attempt, a non-empty subset of it."""
        if len(candidates) == 1:
            return candidates[0]
        if strategy is Strategy.ROUND_ROBIN:
            return self._round_robin(turn_key, tuple(d.name for d in group), candidates)
        if strategy is Strategy.LEAST_BUSY:
            fewest = min(self._stats[c.name].in_flight for c in candidates)
            return self._weighted([c for c in candidates if self._stats[c.name].in_flight == fewest])
        if strategy is Strategy.LOWEST_LATENCY:
            return self._lowest_latency(candidates)
        if strategy is Strategy.PRIORITY:
            first = min(c.priority for c in candidates)
            return self._weighted([c for c in candidates if c.priority == first])
        return self._weighted(candidates)

    def _weighted(self, candidates: Sequence[Deployment]) -> Deployment:
        if len(candidates) == 1:
            return candidates[0]
        return self._rng.choices(candidates, weights=[c.weight for c in candidates])[0]

    def _round_robin(
        self, turn_key: tuple[str, ...], group: tuple[str, ...], candidates: Sequence[Deployment]
    ) -> Deployment:
        turns = self._turns.get(turn_key)
        if turns is None:
            turns = self._turns[turn_key] = itertools.count()
        eligible = {c.name: c for c in candidates}
        start = next(turns)
        for offset in range(len(group)):
            chosen = eligible.get(group[(start + offset) % len(group)])
            if chosen is not None:
                return chosen
        return candidates[0]

    def _lowest_latency(self, candidates: Sequence[Deployment]) -> Deployment:
        # A deployment with no sample yet is tried first, so every member gets measured.
        unmeasured = [c for c in candidates if self._stats[c.name].latency_s is None]
        if unmeasured:
            return self._weighted(unmeasured)
        return min(candidates, key=lambda c: self._stats[c.name].latency_s or 0.0)
