"""A deployment as served, and what this process has observed about it (load and latency)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from policies.cache.policy import CachePolicy
from providers.base import Provider

if TYPE_CHECKING:
    from gateway.guarding import Guards

# Weight of the newest sample in the latency moving average: about the last ten requests count.
_LATENCY_SMOOTHING = 0.2


@dataclass(frozen=True, slots=True)
class Deployment:
    """A configured deployment: its provider, or why it cannot serve, and its routing settings."""

    name: str
    provider_type: str
    timeout_s: float
    provider: Provider | None
    unavailable: str | None = None
    tags: frozenset[str] = frozenset()
    weight: float = 1.0
    priority: int = 0
    retries: int = 2
    fallbacks: tuple[str, ...] = ()
    cache: CachePolicy | None = None  # from its policies; None: its answers are never cached
    guards: Guards | None = None  # from its policies' input and output checks; None: no guardrails


@dataclass(slots=True)
class DeploymentStats:
    """Per-process load and latency of one deployment, for the least-busy and lowest-latency strategies."""

    in_flight: int = 0
    latency_s: float | None = None  # moving average; None until the first success

    def record_latency(self, seconds: float) -> None:
        if self.latency_s is None:
            self.latency_s = seconds
        else:
            self.latency_s += _LATENCY_SMOOTHING * (seconds - self.latency_s)


@dataclass(slots=True)
class StatsBoard:
    """Stats by deployment name; they outlive config reloads, so a reload does not reset balancing."""

    by_name: dict[str, DeploymentStats] = field(default_factory=dict)

    def __getitem__(self, name: str) -> DeploymentStats:
        stats = self.by_name.get(name)
        if stats is None:
            stats = self.by_name[name] = DeploymentStats()
        return stats
