"""What one request's guardrails may cost: the `guardrails:` block of a policy, and the tally a
request keeps of its guardrail work on each stage.

    policies:
      default:
        input: [{check: webhook, url: ..., protocol: gateway-batch, action: deny}]
        guardrails: {max_calls: 256, deadline_ms: 30000}

- ``max_calls`` bounds the calls one request makes to each remote check (webhook, classifier) on
  each stage. A batching check sends many texts per call (`texts_per_call`), so the texts it can
  take are ``max_calls`` times ``texts_per_call``; an input beyond is refused before any call (400), an
  output text beyond gets the check's failure verdict (its ``fail_open`` decides).
- ``deadline_ms`` bounds the time a request's guardrail work on one stage may take, all its calls
  together: the clock runs while some guardrail work of that stage is under way (never while the
  upstream answers a stream), and a remote check still waiting when it runs out gets its failure
  verdict. Local checks always finish: their work is bounded by the body size and yields the loop.

A deployment with several policies takes, for each setting, the smallest any of them sets.
`Work` is that tally: one per request and stage, carried by `RequestFacts`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field

MAX_CALLS = 256  # a chat with a large tool set has a few hundred texts; per-text webhooks must still serve it
DEADLINE_MS = 30_000.0
DEADLINE_PASSED = "no answer before the request's guardrail deadline (guardrails.deadline_ms)"


class GuardrailBounds(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    max_calls: int = Field(default=MAX_CALLS, ge=1, le=100_000)  # per remote check, request and stage
    deadline_ms: float = Field(default=DEADLINE_MS, gt=0, le=600_000)  # a request's guardrail time per stage

    @property
    def deadline_s(self) -> float:
        return self.deadline_ms / 1000


DEFAULT_BOUNDS = GuardrailBounds()


def combine_bounds(blocks: Iterable[GuardrailBounds | None]) -> GuardrailBounds:
    """The bounds of a deployment: per setting, the smallest that one of its policies sets."""
    chosen: dict[str, float] = {}
    for block in blocks:
        if block is None:
            continue
        for name in block.model_fields_set:
            value = getattr(block, name)
            chosen[name] = min(chosen.get(name, value), value)
    return GuardrailBounds.model_validate(chosen) if chosen else DEFAULT_BOUNDS


class Work:
    """One request's guardrail work on one stage: the calls made to each remote check, and the time
    spent while some of it was under way (concurrent runs count once)."""

    __slots__ = ("_active", "_since", "_spent", "calls")

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}
        self._active = 0
        self._since = 0.0
        self._spent = 0.0

    def begin(self) -> None:
        if self._active == 0:
            self._since = time.monotonic()
        self._active += 1

    def end(self) -> None:
        self._active -= 1
        if self._active == 0:
            self._spent += time.monotonic() - self._since

    def spent(self) -> float:
        running = time.monotonic() - self._since if self._active else 0.0
        return self._spent + running

    def left(self, budget_s: float) -> float:
        """Seconds until the budget runs out, if the work goes on without a pause (may be <= 0)."""
        return budget_s - self.spent()
