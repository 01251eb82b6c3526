"""`length`: limits in characters and estimated tokens, and a cap on the request's ``max_tokens``.

Tokens are estimated as ``ceil(characters / 4)`` (OpenAI's rule of thumb for English; no tokenizer
is loaded on the hot path); a prompt given as token ids is counted exactly. ``redact`` truncates the
text to the limit and clamps ``max_tokens`` to the cap; on streams it ends the choice with
``finish_reason: "length"`` once the limit is reached. The ``max_tokens`` cap applies to input only.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from policies.guardrails.base import PASS, CheckConfig, Finding, RequestFacts
from policies.guardrails.verdict import Stage

CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    return -(-len(text) // CHARS_PER_TOKEN)


class LengthConfig(CheckConfig):
    check: Literal["length"]
    # Texts longer than this are a hit.
    max_chars: int | None = Field(default=None, ge=1)
    max_tokens: int | None = Field(default=None, ge=1)  # estimated tokens of the text
    max_completion_tokens: int | None = Field(default=None, ge=1)  # cap on the request's max_tokens

    @model_validator(mode="after")
    def _has_limit(self) -> LengthConfig:
        if self.max_chars is None and self.max_tokens is None and self.max_completion_tokens is None:
            raise ValueError("a length check needs max_chars, max_tokens or max_completion_tokens")
        return self

    def build(self) -> LengthCheck:
        return LengthCheck(self)


class LengthCheck:
    is_async = False
    needs_text = False

    def __init__(self, config: LengthConfig) -> None:
        self.config = config
        limits = [config.max_chars, None if config.max_tokens is None else config.max_tokens * CHARS_PER_TOKEN]
        self.char_limit = min((limit for limit in limits if limit is not None), default=None)

    def evaluate(self, text: str, facts: RequestFacts, stage: Stage, index: int) -> Finding:
        cap = self._cap(facts, stage)
        if cap is not None:
            return cap
        limit = self.char_limit
        if limit is None or len(text) <= limit:
            return PASS
        reason = (
            f"{len(text)} characters (about {estimate_tokens(text)} tokens) exceeds the limit of {limit} characters"
        )
        return Finding(hit=True, reason=reason, labels=("chars",), text=text[:limit])

    def evaluate_tokens(self, count: int, facts: RequestFacts, stage: Stage) -> Finding:
        """A token-id prompt: its length is known exactly without decoding it."""
        cap = self._cap(facts, stage)
        if cap is not None:
            return cap
        limit = self.config.max_tokens
        if limit is None or count <= limit:
            return PASS
        return Finding(hit=True, reason=f"{count} prompt tokens exceeds the limit of {limit}", labels=("tokens",))

    def _cap(self, facts: RequestFacts, stage: Stage) -> Finding | None:
        cap = self.config.max_completion_tokens
        if stage != "input" or cap is None or facts.max_tokens is None or facts.max_tokens <= cap:
            return None
        reason = f"max_tokens {facts.max_tokens} exceeds the cap of {cap}"
        return Finding(hit=True, reason=reason, labels=("max_tokens",), text=None, max_tokens=cap)

    async def evaluate_async(self, text: str, facts: RequestFacts, stage: Stage, index: int) -> Finding:
        return self.evaluate(text, facts, stage, index)
