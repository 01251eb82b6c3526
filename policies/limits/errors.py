"""429 and 503 answers of the limits, in the one OpenAI error envelope.

Messages name only the caller's own key (or the deployment it chose) and that key's own limit:
never another key, a total across keys, or a secret.
"""

from __future__ import annotations

from gateway.errors import GatewayError
from policies.limits.decision import RateDecision, Refusal, format_duration, retry_after_seconds
from policies.limits.specs import BudgetSpec

_PER_MINUTE = {"requests": "requests per minute", "tokens": "tokens per minute", "concurrent": "concurrent requests"}


class RateLimited(GatewayError):
    status = 429
    type = "rate_limit_error"
    code = "rate_limit_exceeded"

    @classmethod
    def from_decision(cls, decision: RateDecision, refusal: Refusal) -> RateLimited:
        wait = retry_after_seconds(refusal.retry_after_s)
        message = (
            f"Rate limit reached for {refusal.scope} {refusal.name!r}: {refusal.limit} "
            f"{_PER_MINUTE[refusal.dimension]}. Retry after {wait}s."
        )
        error = cls(message, headers=decision.headers())
        error.scope = refusal.scope
        return error

    scope: str = "key"  # whose limit refused: "key" or "deployment" (the metrics' label)


class BudgetExceeded(GatewayError):
    status = 429
    type = "insufficient_quota"  # what OpenAI's SDKs and clients know for "quota spent"
    code = "budget_exceeded"

    @classmethod
    def for_key(cls, key: str, budget: BudgetSpec, dimension: str, renews_in_s: float) -> BudgetExceeded:
        message = (
            f"Budget exceeded for key {key!r}: its {dimension} budget for the current {budget.period} period "
            f"is spent. It renews in {format_duration(renews_in_s)}."
        )
        return cls(message, headers={"retry-after": str(retry_after_seconds(renews_in_s))})


class LimitsUnavailable(GatewayError):
    """Redis failed and `limits.on_redis_error` is `closed`."""

    status = 503
    type = "service_unavailable"
    code = "limits_unavailable"

    def __init__(self) -> None:
        super().__init__(
            "Rate limits and budgets cannot be checked right now; the request was not served. Retry shortly.",
            headers={"retry-after": "1"},
        )
