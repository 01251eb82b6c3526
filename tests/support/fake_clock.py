"""A clock for tests: time moves only when a test (or a fake sleep) says so."""

from __future__ import annotations


class FakeClock:
    """A clock that only moves when told to (or when `RecordingSleep` sleeps on it)."""

    def __init__(self, start: float = 1_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
