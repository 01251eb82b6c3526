"""A deployment as served, and what this process has observed about it (load and latency)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from policies.cache.policy import CachePolicy
from providers.base import APIS, Api, Provider

if TYPE_CHECKING:
    from policies.guardrails.guards import Guards

# Weight of the newest sample in the latency moving average: about the last ten requests count.
_LATENCY_SMOOTHING = 0.2

CREDENTIAL_UNSET = "credential_unset"  # the environment variable holding its credential is unset or empty
UNAVAILABLE = "unavailable"  # any other reason it has no provider
CIRCUIT_OPEN = "circuit_open"  # not a reason it cannot serve, but one to pass it over for now
API_UNSERVED = "api_unserved"  # it does not serve the API the request came in on (chat, completions)


@dataclass(frozen=True, slots=True)
class Unavailable:
    """Why a deployment cannot serve: a word for headers, logs and /ready, and sentences for people.
    Names environment variables and virtual keys, never a secret's value."""

    code: str  # CREDENTIAL_UNSET or UNAVAILABLE
    reason: str  # a clause: "its credential ${OPENAI_API_KEY} (virtual key 'openai-main') is not set on the gateway"
    remedy: str  # a sentence: "Set OPENAI_API_KEY in the gateway's environment and restart it."

    def message(self, deployment: str) -> str:
        return f"Deployment '{deployment}' cannot serve: {self.reason}. {self.remedy}"

    @classmethod
    def credential_unset(cls, variable: str, virtual_key: str | None) -> Unavailable:
        source = f"virtual key '{virtual_key}'" if virtual_key else "provider.api_key"
        return cls(
            CREDENTIAL_UNSET,
            f"its credential ${{{variable}}} ({source}) is not set on the gateway",
            # A reload reads the process's environment again, which a shell cannot change: restart.
            f"Set {variable} in the gateway's environment and restart it.",
        )


_NO_PROVIDER = Unavailable(UNAVAILABLE, "it has no provider", "Check the gateway's start-up log.")


@dataclass(frozen=True, slots=True)
class Deployment:
    """A configured deployment: its provider, or why it cannot serve, and its routing settings."""

    name: str
    provider_type: str
    timeout_s: float
    provider: Provider | None
    unavailable: Unavailable | None = None  # set when provider is None
    tags: frozenset[str] = frozenset()
    weight: float = 1.0
    priority: int = 0
    retries: int = 2
    fallbacks: tuple[str, ...] = ()
    cache: CachePolicy | None = None  # from its policies; None: its answers are never cached
    guards: Guards | None = None  # from its policies' input and output checks; None: no guardrails
    apis: frozenset[Api] = APIS  # the client APIs it serves: its provider's, narrowed by its `apis` setting
    apis_narrowed: bool = False  # its `apis` setting left out one its provider serves (for the 400's words)
    native_apis: frozenset[str] = frozenset()  # the client APIs its provider speaks itself (`NativeRequest`)

    def unavailability(self) -> Unavailable | None:
        """Why it cannot serve; None when it can."""
        if self.provider is not None:
            return None
        return self.unavailable or _NO_PROVIDER


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
