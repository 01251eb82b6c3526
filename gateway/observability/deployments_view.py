"""`GET /admin/deployments`: what /ready says of each deployment (its state in the same words, why
it cannot serve) with what an operator needs beside it: its routing settings and this worker's load."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.observability.readiness import Readiness
from gateway.routing.breaker import CircuitBreakers
from gateway.routing.deployments import Deployment, StatsBoard


async def deployments_view(
    readiness: Readiness,
    source: str,
    deployments: Mapping[str, Deployment],
    breakers: CircuitBreakers,
    stats: StatsBoard,
    now: float,
) -> dict[str, Any]:
    status, body = await readiness.report(source, deployments, breakers, now)
    states: dict[str, dict[str, str]] = body["deployments"]
    rows = []
    for name, deployment in deployments.items():
        seen = stats.by_name.get(name)
        rows.append(
            {
                "name": name,
                **states[name],
                "reason": states[name].get("reason"),
                "tags": sorted(deployment.tags),
                "apis": sorted(deployment.apis),
                "fallbacks": list(deployment.fallbacks),
                "retries": deployment.retries,
                "timeout_s": deployment.timeout_s,
                "weight": deployment.weight,
                "priority": deployment.priority,
                "in_flight": seen.in_flight if seen is not None else 0,
                "latency_ms": round(seen.latency_s * 1000, 1) if seen is not None and seen.latency_s else None,
            }
        )
    return {
        "status": body["status"],
        "ready": status == 200,
        "config": source,
        "redis": body["redis"],
        "data": rows,
    }
