"""The numbers behind /dashboard: per-deployment totals and latency buckets, read from the metrics.

Read from the same registry as /metrics (every worker's series in multiprocess mode), as totals
since start; the page diffs successive polls into live rates and windowed percentiles, the way
Prometheus' `rate()` and `histogram_quantile()` would. Each deployment also has a `state` in
/ready's words: `unavailable` (with its `reason`) for one that cannot serve, whatever its
circuit says, else from its circuit (the worst any worker sees).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry

from gateway import __version__
from gateway.observability.metrics import CIRCUIT_VALUES, LATENCY_BUCKETS
from gateway.observability.readiness import CIRCUIT_REASONS, HALF_OPEN, READY, UNAVAILABLE
from gateway.routing.deployments import CIRCUIT_OPEN

_CIRCUIT_NAMES = {value: name for name, value in CIRCUIT_VALUES.items()}
_STATE_OF_CIRCUIT = {"closed": READY, "open": CIRCUIT_OPEN, "half_open": HALF_OPEN}


@dataclass(slots=True)
class _Deployment:
    provider: str = ""
    requests: float = 0.0
    errors: float = 0.0  # 5xx, and streams ended by an error after their 200: the gateway or its upstream failed
    rejected: float = 0.0  # 4xx: the client's request was refused
    hits: float = 0.0
    misses: float = 0.0
    circuit: str = "closed"
    unavailable: str | None = None  # why it cannot serve, from the config now serving
    buckets: dict[float, float] = field(default_factory=dict)  # le -> cumulative count

    def as_json(self, name: str) -> dict[str, Any]:
        bounds = [*LATENCY_BUCKETS, math.inf]
        state = UNAVAILABLE if self.unavailable is not None else _STATE_OF_CIRCUIT.get(self.circuit, CIRCUIT_OPEN)
        return {
            "name": name,
            "provider": self.provider,
            "state": state,
            "reason": self.unavailable if self.unavailable is not None else CIRCUIT_REASONS.get(state),
            "requests": self.requests,
            "errors": self.errors,
            "rejected": self.rejected,
            "cache_hits": self.hits,
            "cache_misses": self.misses,
            "circuit": self.circuit,
            "latency_le": [b if b != math.inf else None for b in bounds],  # None: +Inf (JSON has no Infinity)
            "latency_counts": [self.buckets.get(b, 0.0) for b in bounds],
        }


def snapshot(registry: CollectorRegistry, unavailable: Mapping[str, tuple[str, str]] | None = None) -> dict[str, Any]:
    """`unavailable`: deployment -> (provider type, why it cannot serve), for those of the config now serving."""
    deployments: dict[str, _Deployment] = {}
    for unserving, (provider, reason) in (unavailable or {}).items():
        deployments[unserving] = _Deployment(provider=provider, unavailable=reason)
    in_flight = 0.0
    for family in registry.collect():
        for sample in family.samples:
            labels, value = sample.labels, sample.value
            if sample.name == "gateway_in_flight_requests":
                in_flight += value
                continue
            name = labels.get("deployment")
            if name is None:
                continue
            entry = deployments.get(name) or deployments.setdefault(name, _Deployment())
            if sample.name == "gateway_requests_total":
                _count_request(entry, labels, value)
            elif sample.name == "gateway_request_duration_seconds_bucket":
                le = float(labels["le"])
                entry.buckets[le] = entry.buckets.get(le, 0.0) + value
            elif sample.name == "gateway_request_errors_total" and labels.get("mid_stream") == "true":
                entry.errors += value  # a 2xx in gateway_requests_total, but its stream ended in an error
            elif sample.name == "gateway_circuit_state":
                entry.circuit = _CIRCUIT_NAMES.get(int(value), "open")
    return {
        "time": time.time(),
        "version": __version__,
        "in_flight": in_flight,
        "deployments": [entry.as_json(name) for name, entry in sorted(deployments.items())],
    }


def _count_request(entry: _Deployment, labels: dict[str, str], value: float) -> None:
    entry.provider = labels.get("provider", entry.provider)
    entry.requests += value
    status_class = labels.get("status_class", "")
    if status_class == "5xx":
        entry.errors += value
    elif status_class == "4xx":
        entry.rejected += value
    cache = labels.get("cache_status")
    if cache == "hit":
        entry.hits += value
    elif cache == "miss":
        entry.misses += value
