"""What a limiter answers, and how it reads in OpenAI's `x-ratelimit-*` and `Retry-After` headers."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

Dimension = Literal["requests", "tokens", "concurrent"]


@dataclass(frozen=True, slots=True)
class Bucket:
    """One dimension of one scope after the decision: what the headers report."""

    limit: int
    remaining: int
    reset_s: float  # until the bucket is full again


@dataclass(frozen=True, slots=True)
class Refusal:
    scope: str  # "key" or "deployment"
    name: str
    dimension: Dimension
    limit: int
    retry_after_s: float
    fits: bool = True  # False: the request asks more tokens than the bucket holds, waiting cannot help


@dataclass(frozen=True, slots=True)
class RateDecision:
    """`requests` / `tokens`: the tightest bucket over every scope checked (None: not limited)."""

    refusal: Refusal | None = None
    requests: Bucket | None = None
    tokens: Bucket | None = None

    @property
    def allowed(self) -> bool:
        return self.refusal is None

    def headers(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for label, bucket in (("requests", self.requests), ("tokens", self.tokens)):
            if bucket is not None:
                out[f"x-ratelimit-limit-{label}"] = str(bucket.limit)
                out[f"x-ratelimit-remaining-{label}"] = str(max(bucket.remaining, 0))
                out[f"x-ratelimit-reset-{label}"] = format_duration(bucket.reset_s)
        if self.refusal is not None and self.refusal.fits:
            out["retry-after"] = str(retry_after_seconds(self.refusal.retry_after_s))
        return out


def tighter(current: Bucket | None, candidate: Bucket | None) -> Bucket | None:
    if candidate is None:
        return current
    if current is None or candidate.remaining < current.remaining:
        return candidate
    return current


def retry_after_seconds(seconds: float) -> int:
    """HTTP wants whole seconds; never 0, which clients read as 'retry at once'."""
    return max(1, math.ceil(seconds))


def format_duration(seconds: float) -> str:
    """OpenAI's (Go's) duration style: `20ms`, `1s`, `2.5s`, `6m0s`, `1h2m3s`."""
    if seconds <= 0:
        return "0s"
    if seconds < 1:
        return f"{max(1, round(seconds * 1000))}ms"
    if seconds < 60:
        return f"{round(seconds, 3):g}s"
    whole = math.ceil(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes}m{secs}s" if hours else f"{minutes}m{secs}s"
