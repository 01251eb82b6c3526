"""The `routing:` section of config.yaml: strategies, retries, backoff, circuit breaker, reloads."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

Seconds = Annotated[float, Field(ge=0, le=3600)]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Strategy(StrEnum):
    WEIGHTED = "weighted"  # random, in proportion to `weight`
    ROUND_ROBIN = "round_robin"
    LEAST_BUSY = "least_busy"  # fewest requests in flight in this process
    LOWEST_LATENCY = "lowest_latency"  # lowest moving average of recent latencies
    PRIORITY = "priority"  # lowest `priority` first; weighted among equals


class TagsMatch(StrEnum):
    ALL = "all"  # a deployment must carry every requested tag
    ANY = "any"  # one of them is enough


class BackoffConfig(_Section):
    # Wait before the first retry.
    initial_s: Seconds = 0.1
    # Each further retry waits this many times longer.
    multiplier: Annotated[float, Field(ge=1, le=10)] = 2.0
    # The longest wait between retries.
    max_s: Seconds = 2.0
    # An upstream's Retry-After is honoured up to this; a longer one moves on to the next candidate.
    retry_after_max_s: Seconds = 10.0


class BreakerConfig(_Section):
    # false: deployments are never taken out of rotation.
    enabled: bool = True
    # Failures in a row that open a deployment's circuit.
    consecutive_failures: Annotated[int, Field(ge=1)] = 5
    # Or: this share of failures within window_s (with at least min_requests) opens it.
    failure_ratio: Annotated[float, Field(gt=0, le=1)] = 0.5
    # The window failure_ratio is measured over.
    window_s: Annotated[float, Field(gt=0, le=3600)] = 30.0
    # Requests in the window before failure_ratio applies.
    min_requests: Annotated[int, Field(ge=1)] = 20
    # An open circuit lets one trial request through after this long (half-open).
    cooldown_s: Annotated[float, Field(gt=0, le=3600)] = 30.0
    # How stale this process's view of Redis-shared breaker state may be (0: read it every request).
    sync_interval_s: Seconds = 0.5


class GroupConfig(_Section):
    """Settings for the deployments that share an alias (a group), selected by that alias."""

    # The alias (a name several deployments share) this group configures.
    alias: str
    strategy: Strategy | None = None  # default: routing.strategy
    # Deployments or aliases tried in order when every member failed.
    fallbacks: list[str] = Field(default_factory=list)


class ReloadConfig(_Section):
    watch: bool = True  # reload when the file changes on disk
    # How often the config file is checked for changes (a changed file is reloaded).
    poll_interval_s: Annotated[float, Field(ge=0.1, le=3600)] = 2.0
    # Reloads asked for by a request header; at most one per interval per process.
    header_min_interval_s: Annotated[float, Field(ge=0, le=3600)] = 1.0


class RoutingConfig(_Section):
    # How a deployment is chosen among several candidates.
    strategy: Strategy = Strategy.WEIGHTED
    # any: a deployment carrying any of x-gateway-tags; all: every one of them.
    tags_match: TagsMatch = TagsMatch.ALL
    retries: Annotated[int, Field(ge=0, le=10)] = 2  # per deployment, unless it sets its own
    max_attempts: Annotated[int, Field(ge=1, le=20)] = 5  # upstream calls per request, fallbacks included
    deadline_s: Annotated[float, Field(gt=0, le=3600)] = 120.0  # whole request, until the first byte
    # Waits between retries.
    backoff: BackoffConfig = Field(default_factory=BackoffConfig)
    # Circuit breakers per deployment.
    breaker: BreakerConfig = Field(default_factory=BreakerConfig)
    # Per-alias settings (fallbacks of a group of deployments).
    groups: list[GroupConfig] = Field(default_factory=list)
    # Reloading the config file while serving.
    reload: ReloadConfig = Field(default_factory=ReloadConfig)

    @model_validator(mode="after")
    def _unique_groups(self) -> RoutingConfig:
        aliases = [group.alias for group in self.groups]
        repeated = sorted({alias for alias in aliases if aliases.count(alias) > 1})
        if repeated:
            raise ValueError(f"each group alias may be configured once; repeated: {', '.join(repeated)}")
        return self
