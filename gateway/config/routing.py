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
    initial_s: Seconds = 0.1
    multiplier: Annotated[float, Field(ge=1, le=10)] = 2.0
    max_s: Seconds = 2.0
    # An upstream's Retry-After is honoured up to this; a longer one moves on to the next candidate.
    retry_after_max_s: Seconds = 10.0


class BreakerConfig(_Section):
    enabled: bool = True
    consecutive_failures: Annotated[int, Field(ge=1)] = 5
    failure_ratio: Annotated[float, Field(gt=0, le=1)] = 0.5
    window_s: Annotated[float, Field(gt=0, le=3600)] = 30.0
    min_requests: Annotated[int, Field(ge=1)] = 20
    cooldown_s: Annotated[float, Field(gt=0, le=3600)] = 30.0
    # How stale this process's view of Redis-shared breaker state may be (0: read it every request).
    sync_interval_s: Seconds = 0.5


class GroupConfig(_Section):
    """Settings for the deployments that share an alias (a group), selected by that alias."""

    alias: str
    strategy: Strategy | None = None  # default: routing.strategy
    fallbacks: list[str] = Field(default_factory=list)


class ReloadConfig(_Section):
    watch: bool = True  # reload when the file changes on disk
    poll_interval_s: Annotated[float, Field(ge=0.1, le=3600)] = 2.0
    # Reloads asked for by a request header; at most one per interval per process.
    header_min_interval_s: Annotated[float, Field(ge=0, le=3600)] = 1.0


class RoutingConfig(_Section):
    strategy: Strategy = Strategy.WEIGHTED
    tags_match: TagsMatch = TagsMatch.ALL
    retries: Annotated[int, Field(ge=0, le=10)] = 2  # per deployment, unless it sets its own
    max_attempts: Annotated[int, Field(ge=1, le=20)] = 5  # upstream calls per request, fallbacks included
    deadline_s: Annotated[float, Field(gt=0, le=3600)] = 120.0  # whole request, until the first byte
    backoff: BackoffConfig = Field(default_factory=BackoffConfig)
    breaker: BreakerConfig = Field(default_factory=BreakerConfig)
    groups: list[GroupConfig] = Field(default_factory=list)
    reload: ReloadConfig = Field(default_factory=ReloadConfig)

    @model_validator(mode="after")
    def _unique_groups(self) -> RoutingConfig:
        aliases = [group.alias for group in self.groups]
        repeated = sorted({alias for alias in aliases if aliases.count(alias) > 1})
        if repeated:
            raise ValueError(f"each group alias may be configured once; repeated: {', '.join(repeated)}")
        return self
