"""The two ways to build the limits: in this process, or shared through Redis."""

from __future__ import annotations

from policies.limits.budget import MemoryBudgetStore
from policies.limits.budget_redis import RedisBudgetStore
from policies.limits.rate_memory import MemoryRateLimiter
from policies.limits.rate_redis import RedisRateLimiter
from policies.limits.service import Limits
from policies.limits.specs import LimitsSettings
from policies.redis_pool import RedisClient


def memory_limits(settings: LimitsSettings | None = None) -> Limits:
    """The embedded default: limits held by this process only (one worker, no Redis)."""
    settings = settings or LimitsSettings()
    ttl = settings.lease_ttl_s
    return Limits(MemoryRateLimiter(lease_ttl_s=ttl), MemoryBudgetStore(lease_ttl_s=ttl), settings)


def redis_limits(client: RedisClient, prefix: str, settings: LimitsSettings | None = None) -> Limits:
    """Limits shared by every worker and replica that uses this Redis and `prefix` (e.g. `gateway:`)."""
    settings = settings or LimitsSettings()
    ttl = settings.lease_ttl_s
    rate = RedisRateLimiter(client, prefix=prefix, lease_ttl_s=ttl)
    return Limits(rate, RedisBudgetStore(client, prefix=prefix, lease_ttl_s=ttl), settings)
