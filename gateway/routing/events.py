"""Counts of what routing did (attempts, retries, fallbacks, breaker transitions, upstream errors),
per process.

The pipeline records here; the metrics exporter reads it. Labels are deployment names and fixed
words only, so their number stays bounded.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from gateway.api.errors import GatewayError, UpstreamTimeout
from gateway.routing.breaker_state import Transition

# Error codes the gateway itself gives upstream failures (an upstream's own code is unbounded text).
_OWN_CODES = {
    "upstream_unreachable": "unreachable",
    "upstream_truncated": "truncated",
    "upstream_malformed": "malformed",
    "upstream_stream_error": "stream_error",
    "too_many_upstream_calls": "too_many_calls",
    "upstream_redirect": "redirect",
    "upstream_response_too_large": "too_large",
    "upstream_event_too_large": "event_too_large",
}


@dataclass(slots=True)
class RoutingEvents:
    attempts: Counter[tuple[str, str]] = field(default_factory=Counter)  # (deployment, ok|retryable|fatal)
    retries: Counter[str] = field(default_factory=Counter)  # deployment tried again after failing
    fallbacks: Counter[tuple[str, str]] = field(default_factory=Counter)  # (from, to)
    breaker_transitions: Counter[tuple[str, str]] = field(default_factory=Counter)  # (deployment, new state)
    upstream_errors: Counter[tuple[str, str]] = field(default_factory=Counter)  # (deployment, reason)

    def transition(self, deployment: str, transition: Transition) -> None:
        self.breaker_transitions[deployment, transition.after.value] += 1

    def upstream_error(self, deployment: str, error: GatewayError) -> None:
        self.upstream_errors[deployment, error_reason(error)] += 1


def error_reason(error: GatewayError) -> str:
    """A word from a small fixed set, for the `reason` label: never the upstream's own text."""
    if isinstance(error, UpstreamTimeout):
        return "timeout"
    status = error.upstream_status
    if status == 429:
        return "rate_limited"
    if status is not None:
        return f"status_{status // 100}xx"
    return _OWN_CODES.get(error.code or "", "other")
