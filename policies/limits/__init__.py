"""Rate limits (requests, tokens, concurrency per key and per deployment) and budgets (tokens and
cost per key per period), in this process or shared through Redis. See `service.Limits`."""

from policies.limits.budget import BudgetStore, Charge, MemoryBudgetStore, Spend
from policies.limits.budget_redis import RedisBudgetStore
from policies.limits.decision import Bucket, RateDecision, Refusal, format_duration
from policies.limits.errors import BudgetExceeded, LimitsUnavailable, RateLimited, RequestTooLarge
from policies.limits.estimate import Estimate, estimate
from policies.limits.factory import memory_limits, redis_limits
from policies.limits.guard import STORE_FAILURES, FailureLog, is_outage
from policies.limits.rate import RateLimiter, Scope
from policies.limits.rate_memory import MemoryRateLimiter
from policies.limits.rate_redis import RedisRateLimiter
from policies.limits.service import Admission, Caller, KeyUsage, Limits
from policies.limits.specs import BudgetSpec, LimitSpec, LimitsSettings, Price, period_seconds
from policies.redis_pool import PoolExhausted, bounded_client

__all__ = [
    "STORE_FAILURES",
    "Admission",
    "Bucket",
    "BudgetExceeded",
    "BudgetSpec",
    "BudgetStore",
    "Caller",
    "Charge",
    "Estimate",
    "FailureLog",
    "KeyUsage",
    "LimitSpec",
    "Limits",
    "LimitsSettings",
    "LimitsUnavailable",
    "MemoryBudgetStore",
    "MemoryRateLimiter",
    "PoolExhausted",
    "Price",
    "RateDecision",
    "RateLimited",
    "RateLimiter",
    "RedisBudgetStore",
    "RedisRateLimiter",
    "Refusal",
    "RequestTooLarge",
    "Scope",
    "Spend",
    "bounded_client",
    "estimate",
    "format_duration",
    "is_outage",
    "memory_limits",
    "period_seconds",
    "redis_limits",
]
