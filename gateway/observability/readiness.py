"""What `/ready` checks: the dependencies the gateway needs to serve, reachable right now, and the
state of every deployment (ready, circuit open or half-open, or unavailable and why).

The deployment states are also what the /dashboard page shows, in the same words.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from redis.exceptions import RedisError

from gateway.routing.breaker import CircuitBreakers
from gateway.routing.breaker_state import BreakerRecord, Circuit
from gateway.routing.deployments import CIRCUIT_OPEN, Deployment
from policies.redis_pool import RedisClient, RedisTarget, bounded_client

_CHECK_TIMEOUT_S = 1.0

# A deployment's state, as /ready and /dashboard/data report it.
READY = "ready"  # can serve, circuit closed
HALF_OPEN = "half_open"  # can serve; one probe request at a time is let through
UNAVAILABLE = "unavailable"  # cannot serve (its credential is not set): `reason` says what to set
STATES = (READY, CIRCUIT_OPEN, HALF_OPEN, UNAVAILABLE)  # CIRCUIT_OPEN: passed over until its cooldown ends

CIRCUIT_REASONS = {
    CIRCUIT_OPEN: "its circuit is open after repeated upstream failures: requests go to other candidates "
    "until its cooldown ends and a probe succeeds",
    HALF_OPEN: "its circuit is half-open: one probe request at a time is let through",
}
_STATE_OF_CIRCUIT = {Circuit.CLOSED: READY, Circuit.OPEN: CIRCUIT_OPEN, Circuit.HALF_OPEN: HALF_OPEN}


def deployment_state(deployment: Deployment, circuit: Circuit) -> dict[str, str]:
    """{"state", "provider"} and, unless it is ready, a "reason" in words (never a secret)."""
    why = deployment.unavailability()
    if why is not None:
        return {"state": UNAVAILABLE, "provider": deployment.provider_type, "reason": why.message(deployment.name)}
    state = _STATE_OF_CIRCUIT[circuit]
    entry = {"state": state, "provider": deployment.provider_type}
    if state in CIRCUIT_REASONS:
        entry["reason"] = CIRCUIT_REASONS[state]
    return entry


def deployment_states(
    deployments: Mapping[str, Deployment], breakers: CircuitBreakers, now: float
) -> dict[str, dict[str, str]]:
    """Every deployment's state, its circuit as this process last saw it."""
    return {name: deployment_state(d, _circuit(breakers, name, now)) for name, d in deployments.items()}


def _circuit(breakers: CircuitBreakers, name: str, now: float) -> Circuit:
    if not breakers.config.enabled:
        return Circuit.CLOSED
    return BreakerRecord(opened_at=breakers.opened_at(name)).circuit(breakers.config, now)


class Readiness:
    def __init__(self, redis_url: str | RedisTarget, *, redis_required: bool = True) -> None:
        """`redis_required`: whether requests stop being served while Redis is down (the limits fail
        closed). When they fail open, Redis down is reported but the process stays ready: keys from
        the config and those already seen authenticate, the cache misses, the breakers keep their last
        view, so taking every replica out of the Service at once would refuse what could be served."""
        self._redis: RedisClient | None = None
        self._redis_required = redis_required
        self.draining = False  # shutting down: never ready again, whatever the checks say
        if isinstance(redis_url, str):
            redis_url = RedisTarget(url=redis_url)
        if redis_url.configured:
            self._redis = bounded_client(  # like every Redis client: a burst of probes waits, never overflows
                redis_url, socket_timeout=_CHECK_TIMEOUT_S, socket_connect_timeout=_CHECK_TIMEOUT_S
            )

    async def report(
        self, source: str, deployments: Mapping[str, Deployment], breakers: CircuitBreakers, now: float
    ) -> tuple[int, dict[str, Any]]:
        """(status, body): 200 when at least one deployment can serve (an open circuit still can) and
        Redis, if configured and required, answers; 503 otherwise, and always once the process is
        shutting down."""
        states = deployment_states(deployments, breakers, now)
        if self.draining:
            return 503, {"status": "shutting down", "config": source, "redis": "not checked", "deployments": states}
        redis = await self.redis_status()
        redis_serves = redis in ("ok", "not configured") or not self._redis_required
        is_ready = any(s["state"] != UNAVAILABLE for s in states.values()) and redis_serves
        body = {"status": "ready" if is_ready else "not ready", "config": source, "redis": redis, "deployments": states}
        return (200 if is_ready else 503), body

    async def redis_status(self) -> str:
        if self._redis is None:
            return "not configured"
        try:
            await asyncio.wait_for(self._redis.ping(), _CHECK_TIMEOUT_S)
        except (TimeoutError, RedisError, OSError):
            return "unreachable"
        return "ok"

    async def aclose(self) -> None:
        if self._redis is not None:
            await self._redis.aclose()
