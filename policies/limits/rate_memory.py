"""The rate limiter in this process: the embedded default when no Redis is configured.

No await between reading and writing the state, so each call is atomic within the event loop.
Semantics are those of `rate.py`, the same as the Redis script's; one test suite runs on both.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from policies.limits.decision import RateDecision, Refusal
from policies.limits.rate import (
    CONCURRENT_RETRY_S,
    Scope,
    ScopeOutcome,
    bucket,
    combine,
    correction,
    longest,
    refill,
    refusal_for,
    seconds_until,
    too_large,
)


@dataclass(slots=True)
class _State:
    requests: float = 0.0
    tokens: float = 0.0
    at: float | None = None  # None: both buckets full
    leases: dict[str, float] = field(default_factory=dict)  # lease id -> expiry


class MemoryRateLimiter:
    def __init__(self, *, lease_ttl_s: float = 900.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._lease_ttl_s = lease_ttl_s
        self._clock = clock
        self._states: dict[str, _State] = {}

    async def acquire(self, scopes: Sequence[Scope], tokens: int, lease_id: str) -> RateDecision:
        now = self._clock()
        states = [self._refilled(scope, now) for scope in scopes]
        refusal: Refusal | None = None
        for scope, state in zip(scopes, states, strict=True):
            for candidate in _refusals(scope, state, tokens):
                refusal = longest(refusal, candidate)
        if refusal is None:
            for scope, state in zip(scopes, states, strict=True):
                state.requests -= 1 if scope.limits.rpm else 0
                state.tokens -= tokens if scope.limits.tpm else 0
                if scope.limits.concurrent:
                    state.leases[lease_id] = now + self._lease_ttl_s
        return combine([_outcome(scope, state) for scope, state in zip(scopes, states, strict=True)], refusal)

    async def finish(self, scopes: Sequence[Scope], lease_id: str, token_delta: int, estimated: int = 0) -> None:
        now = self._clock()
        for scope in scopes:
            state = self._refilled(scope, now)
            state.leases.pop(lease_id, None)
            if tpm := scope.limits.tpm:
                state.tokens = min(float(tpm), state.tokens - correction(token_delta, estimated, tpm))

    def _refilled(self, scope: Scope, now: float) -> _State:
        state = self._states.get(scope.id)
        if state is None:
            state = self._states[scope.id] = _State()
        limits = scope.limits
        state.requests = refill(state.requests, state.at, now, limits.rpm) if limits.rpm else 0.0
        state.tokens = refill(state.tokens, state.at, now, limits.tpm) if limits.tpm else 0.0
        state.at = now
        state.leases = {lease: expiry for lease, expiry in state.leases.items() if expiry > now}
        return state


def _refusals(scope: Scope, state: _State, tokens: int) -> list[Refusal]:
    limits, found = scope.limits, []
    if limits.rpm and state.requests < 1:
        found.append(refusal_for(scope, "requests", limits.rpm, seconds_until(state.requests, 1, limits.rpm)))
    if limits.tpm and tokens > limits.tpm:
        found.append(too_large(scope, limits.tpm))
    elif limits.tpm and tokens > 0 and state.tokens < tokens:
        found.append(refusal_for(scope, "tokens", limits.tpm, seconds_until(state.tokens, tokens, limits.tpm)))
    if limits.concurrent and len(state.leases) >= limits.concurrent:
        found.append(refusal_for(scope, "concurrent", limits.concurrent, CONCURRENT_RETRY_S))
    return found


def _outcome(scope: Scope, state: _State) -> ScopeOutcome:
    limits = scope.limits
    return ScopeOutcome(
        requests=bucket(state.requests, limits.rpm) if limits.rpm else None,
        tokens=bucket(state.tokens, limits.tpm) if limits.tpm else None,
    )
