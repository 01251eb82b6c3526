"""Cache configuration: the per-deployment policy and the process-wide backend settings.

`CachePolicy` is the `cache:` block of a named policy (``policies: {default: {cache: {ttl_s: 600}}}``);
its presence turns caching on for the deployments that name the policy. `CacheSettings` configures
the backends every deployment shares (one LRU per process, one Redis client), so it cannot be per
deployment: it belongs in a top-level block next to ``redis:``, whose ``url`` and ``prefix`` the
Redis tier uses (entries live under ``<redis.prefix>cache:``).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

MIB = 1024 * 1024
DAY_S = 86_400.0


class CachePolicy(BaseModel):
    """How one deployment's responses are cached."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True  # a `cache:` block turns caching on unless it says otherwise
    # How long a cached answer is served.
    ttl_s: float = Field(default=600.0, gt=0, le=365 * DAY_S)
    # Answers larger than this are not cached.
    max_entry_bytes: int = Field(default=MIB, gt=0, le=256 * MIB)
    cache_nonzero_temperature: bool = True  # clients opting in to a cache expect repeats to hit
    redis: bool = True  # share entries through Redis when the gateway has one; false: this process only


class CacheSettings(BaseModel):
    """The backends shared by every deployment in one gateway process."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    memory_max_bytes: int = Field(default=64 * MIB, ge=0)  # 0: no in-process tier
    redis_timeout_ms: float = Field(default=10.0, gt=0, le=1000)  # per Redis call; slower is a miss
    redis_backoff_s: float = Field(default=1.0, ge=0)  # after a Redis failure, skip Redis this long
    log_interval_s: float = Field(default=60.0, gt=0)  # Redis failures are logged at most this often
