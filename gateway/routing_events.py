"""Counts of what routing did (attempts, retries, fallbacks, breaker transitions), per process.

The pipeline records here; the metrics exporter reads it. Labels are deployment names and fixed
words only, so their number stays bounded.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from gateway.breaker_state import Transition


@dataclass(slots=True)
class RoutingEvents:
    attempts: Counter[tuple[str, str]] = field(default_factory=Counter)  # (deployment, ok|retryable|fatal)
    retries: Counter[str] = field(default_factory=Counter)  # deployment tried again after failing
    fallbacks: Counter[tuple[str, str]] = field(default_factory=Counter)  # (from, to)
    breaker_transitions: Counter[tuple[str, str]] = field(default_factory=Counter)  # (deployment, new state)

    def transition(self, deployment: str, transition: Transition) -> None:
        self.breaker_transitions[deployment, transition.after.value] += 1
