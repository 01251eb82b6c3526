"""The circuit breaker's state machine, as pure functions over one deployment's record.

closed ──(N consecutive failures, or failure ratio over the window)──► open
open ──(cooldown elapsed)──► half-open: one probe request at a time is let through
half-open ──probe succeeds──► closed;  half-open ──probe fails──► open again
open ──a request let through anyway succeeds──► closed

Kept pure so that the in-process store and the Redis store (which applies it inside a
WATCH/MULTI transaction) share one implementation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from enum import StrEnum

from gateway.config.routing import BreakerConfig


class Circuit(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass(frozen=True, slots=True)
class BreakerRecord:
    consecutive_failures: int = 0
    window_start: float = 0.0
    window_requests: int = 0
    window_failures: int = 0
    opened_at: float = 0.0  # 0: closed
    probe_until: float = 0.0  # a half-open probe is in flight until then

    def circuit(self, config: BreakerConfig, now: float) -> Circuit:
        if not self.opened_at:
            return Circuit.CLOSED
        return Circuit.OPEN if now < self.opened_at + config.cooldown_s else Circuit.HALF_OPEN

    def to_fields(self) -> dict[str, str]:
        return {name: repr(value) for name, value in asdict(self).items()}

    @classmethod
    def from_fields(cls, fields: Mapping[str | bytes, str | bytes]) -> BreakerRecord:
        """Read a stored record (Redis gives bytes); unreadable or missing fields take their defaults."""
        text = {_text(k): _text(v) for k, v in fields.items()}
        values: dict[str, float] = {}
        for name, default in asdict(cls()).items():
            try:
                values[name] = type(default)(float(text[name]))
            except (KeyError, ValueError):
                continue
        return cls(**values)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class Transition:
    before: Circuit
    after: Circuit


def record_outcomes(
    record: BreakerRecord,
    config: BreakerConfig,
    now: float,
    successes: int,
    failures: int,
    *,
    may_close: bool = True,
) -> tuple[BreakerRecord, Transition | None]:
    """Apply `successes` then `failures` (counted since the last update) to the record.
    `may_close=False` for successes saved up while the circuit looked closed: they may predate
    its opening (by another process), so they must not close it again."""
    before = record.circuit(config, now)
    if now - record.window_start >= config.window_s:
        record = replace(record, window_start=now, window_requests=0, window_failures=0)
    record = replace(
        record,
        window_requests=record.window_requests + successes + failures,
        window_failures=record.window_failures + failures,
    )
    if successes:
        record = replace(record, consecutive_failures=0)
    if failures:
        record = replace(record, consecutive_failures=record.consecutive_failures + failures)
        if before is Circuit.HALF_OPEN or (before is Circuit.CLOSED and _should_open(record, config)):
            record = replace(record, opened_at=now, probe_until=0.0)
    elif successes and may_close and before is not Circuit.CLOSED:
        # The half-open probe came back well, or a request let through while open (every
        # candidate was open, or it started before the circuit opened) did: it serves again.
        record = BreakerRecord(window_start=now)
    after = record.circuit(config, now)
    return record, (Transition(before, after) if after is not before else None)


def claim_probe(record: BreakerRecord, config: BreakerConfig, now: float, probe_s: float) -> BreakerRecord | None:
    """In half-open state, let one request through (for up to `probe_s`); None when one is already out."""
    if record.circuit(config, now) is not Circuit.HALF_OPEN or now < record.probe_until:
        return None
    return replace(record, probe_until=now + probe_s)


def _text(value: str | bytes) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _should_open(record: BreakerRecord, config: BreakerConfig) -> bool:
    if record.consecutive_failures >= config.consecutive_failures:
        return True
    return (
        record.window_requests >= config.min_requests
        and record.window_failures / record.window_requests >= config.failure_ratio
    )
