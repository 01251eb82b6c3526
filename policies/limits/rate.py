"""The rate limiter's interface and the arithmetic both implementations share.

Requests per minute and tokens per minute are token buckets (the model OpenAI documents for its
own limits): a bucket holds up to the limit, refills continuously at limit/60 per second, and a
request takes one request and its estimated tokens from every bucket it passes. A full bucket
lets a client burst up to the limit at once, then limit/60 per second; `x-ratelimit-reset-*` is
the time until the bucket is full again. After the call the token bucket is corrected by the real
usage minus the estimate: a refund, or a debt that later requests wait out. No single request
takes more than a whole bucket: one estimated above the whole tpm can never fit and is refused at
once (`Refusal.fits` False), taking nothing; one that used more than its estimate is charged at
most the whole bucket (`correction`), so one tenant cannot empty for long a bucket others share.
Concurrency is a set of leases that each expire after `lease_ttl_s`, so a crashed worker's slots
come back on their own. Every check is all-or-nothing over all scopes: a refused request takes
nothing from any bucket.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from policies.limits.decision import Bucket, Dimension, RateDecision, Refusal, tighter
from policies.limits.specs import LimitSpec

WINDOW_S = 60.0
DIMENSIONS: tuple[Dimension, ...] = ("requests", "tokens", "concurrent")
CONCURRENT_RETRY_S = 1.0  # a slot frees when some request ends, which nobody can predict


@dataclass(frozen=True, slots=True)
class Scope:
    """Whose limits: a gateway key's or a deployment's."""

    kind: Literal["key", "deployment"]
    name: str
    limits: LimitSpec

    @property
    def id(self) -> str:
        return f"{self.kind}:{self.name}"


@dataclass(frozen=True, slots=True)
class ScopeOutcome:
    """One scope's buckets after a check (None where that scope has no such limit)."""

    requests: Bucket | None
    tokens: Bucket | None


class RateLimiter(Protocol):
    async def acquire(self, scopes: Sequence[Scope], tokens: int, lease_id: str) -> RateDecision:
        """Take one request, `tokens` estimated tokens and a concurrency slot named `lease_id`
        from every scope, or nothing at all when any of them refuses."""

    async def finish(self, scopes: Sequence[Scope], lease_id: str, token_delta: int, estimated: int = 0) -> None:
        """The call ended: free the slot, and correct the token buckets by real usage minus the
        `estimated` tokens taken at acquire (`correction`)."""


def refill(level: float, last: float | None, now: float, capacity: int) -> float:
    if last is None:  # never seen (or expired from Redis): a full bucket
        return float(capacity)
    return min(float(capacity), level + max(0.0, now - last) * capacity / WINDOW_S)


def correction(token_delta: int, estimated: int, capacity: int) -> int:
    """What a bucket is corrected by: real usage minus estimate, but one request never takes more
    than the whole bucket in all (its estimate was at most the bucket, or it was refused)."""
    return min(token_delta, max(0, capacity - estimated))


def seconds_until(level: float, wanted: float, capacity: int) -> float:
    """How long until a bucket at `level` holds `wanted`."""
    return max(0.0, (wanted - level) * WINDOW_S / capacity)


def bucket(level: float, capacity: int) -> Bucket:
    return Bucket(limit=capacity, remaining=math.floor(level), reset_s=seconds_until(level, capacity, capacity))


def refusal_for(scope: Scope, dimension: Dimension, limit: int, wait_s: float) -> Refusal:
    return Refusal(scope=scope.kind, name=scope.name, dimension=dimension, limit=limit, retry_after_s=wait_s)


def combine(outcomes: Sequence[ScopeOutcome], refusal: Refusal | None) -> RateDecision:
    requests: Bucket | None = None
    tokens: Bucket | None = None
    for outcome in outcomes:
        requests = tighter(requests, outcome.requests)
        tokens = tighter(tokens, outcome.tokens)
    return RateDecision(refusal=refusal, requests=requests, tokens=tokens)


def too_large(scope: Scope, limit: int) -> Refusal:
    """The request's estimate exceeds the whole token bucket: no wait would let it in."""
    return Refusal(scope=scope.kind, name=scope.name, dimension="tokens", limit=limit, retry_after_s=0.0, fits=False)


def longest(current: Refusal | None, candidate: Refusal) -> Refusal:
    """The caller must wait for every refusing bucket: report the one that takes longest, and
    above all a request that can never fit, since waiting does not help it."""
    if current is None:
        return candidate
    if current.fits != candidate.fits:
        return current if not current.fits else candidate
    return candidate if candidate.retry_after_s > current.retry_after_s else current
