"""429 and 503 answers of the limits, in the one OpenAI error envelope.

Messages name only the caller's own key (or the deployment it chose) and that key's own limit:
never another key, a total across keys, or a secret.
"""

from __future__ import annotations

from gateway.api.errors import GatewayError
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


class RequestTooLarge(RateLimited):
    """The request's estimate exceeds a whole tokens-per-minute bucket: it could never run, so it is
    refused at once (as OpenAI's "Request too large … on tokens per min"), with no Retry-After."""

    code = "request_too_large"

    @classmethod
    def for_request(cls, decision: RateDecision, refusal: Refusal, requested: int) -> RequestTooLarge:
        message = (
            f"Request too large for {refusal.scope} {refusal.name!r}: it may use up to {requested} tokens "
            f"(the prompt plus max_tokens for every choice), more than its limit of {refusal.limit} tokens "
            "per minute. Lower max_tokens, n or best_of, or shorten the prompt."
        )
        error = cls(message, headers=decision.headers())
        error.scope = refusal.scope
        return error


class BudgetExceeded(GatewayError):
    status = 429
    type = "insufficient_quota"  # what OpenAI's SDKs and clients know for "quota spent"
    code = "budget_exceeded"

    @classmethod
    def for_key(
        cls, key: str, budget: BudgetSpec, dimension: str, renews_in_s: float, *, wanted: str = "", left: str = ""
    ) -> BudgetExceeded:
        """`wanted` / `left`: this request's estimate and what remains, when something does (in the
        budget's unit, written out); without them the budget is spent."""
        period = f"its {dimension} budget for the current {budget.label} period"
        renews = format_duration(renews_in_s)
        if left:
            message = (
                f"Budget exceeded for key {key!r}: this request may use up to {wanted}, more than the {left} "
                f"left of {period}. Lower max_tokens, n or best_of, or retry once it renews in {renews}."
            )
        else:
            message = f"Budget exceeded for key {key!r}: {period} is spent. It renews in {renews}."
        return cls(message, headers={"retry-after": str(retry_after_seconds(renews_in_s))})


class LimitsUnavailable(GatewayError):
    """The limits could not be checked: Redis is unreachable and `limits.on_redis_error` is `closed`,
    or (whatever that setting) the store answered with an error or this process had no free Redis
    connection in time. Never an admission."""

    status = 503
    type = "service_unavailable"
    code = "limits_unavailable"

    def __init__(self) -> None:
        super().__init__(
            "Rate limits and budgets cannot be checked right now; the request was not served. Retry shortly.",
            headers={"retry-after": "1"},
        )
