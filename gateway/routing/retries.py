"""Which failures are worth another attempt, and how long to wait before one."""

from __future__ import annotations

import random
from email.utils import parsedate_to_datetime

from gateway.api.errors import GatewayError, UpstreamError, UpstreamRejected, UpstreamTimeout
from gateway.config.routing import BackoffConfig

RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504, 529})  # 529: Anthropic overloaded
# Failures of the connection rather than of the request: another attempt may well succeed.
_TRANSPORT_CODES = frozenset({"upstream_unreachable", "upstream_truncated"})


def is_retryable(error: GatewayError) -> bool:
    """Connection errors, timeouts and 408/429/5xx are; every other 4xx would fail again."""
    if isinstance(error, UpstreamTimeout):
        return True
    if error.upstream_status is not None:
        return error.upstream_status in RETRYABLE_STATUSES
    return isinstance(error, UpstreamError) and error.code in _TRANSPORT_CODES


def counts_against_deployment(error: GatewayError) -> bool:
    """What the circuit breaker counts: the deployment's failures, not the client's bad requests."""
    if isinstance(error, UpstreamRejected):
        return error.upstream_status in RETRYABLE_STATUSES
    return isinstance(error, (UpstreamError, UpstreamTimeout))


def retry_after_s(error: GatewayError, now_epoch: float) -> float | None:
    """The upstream's `retry-after-ms` or `Retry-After` (seconds or an HTTP date), if it sent one."""
    milliseconds = error.headers.get("retry-after-ms")
    if milliseconds is not None:
        try:
            return max(0.0, float(milliseconds) / 1000)
        except ValueError:
            pass
    value = error.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - now_epoch)
    except (TypeError, ValueError):
        return None


def backoff_s(config: BackoffConfig, failures: int, rng: random.Random) -> float:
    """Full-jitter exponential backoff before attempt number `failures` + 1 on the same deployment:
    a uniform draw in [0, min(max_s, initial_s * multiplier ** (failures - 1))], so that many
    clients retrying one upstream spread out instead of arriving together."""
    ceiling = min(config.max_s, config.initial_s * config.multiplier ** max(0, failures - 1))
    return rng.uniform(0, ceiling)
