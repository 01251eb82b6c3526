"""Input guardrails: check the prompt(s) before anything is sent upstream.

    outcome = await guard.check(request.prompt, facts, decoder=tokenizer_decode)
    if outcome.denied: raise outcome.error()            # 400 guardrail_violation
    request.prompt = outcome.prompt                      # redacted when a check redacted
    if outcome.max_tokens is not None: request.max_tokens = outcome.max_tokens

Each prompt of a list is checked on its own; verdicts keep the worst per check, with that prompt's
index. A token-id prompt is decoded with ``decoder`` (the deployment's tokenizer) when given, and a
redacted one is sent as text; without a decoder the length check counts its tokens exactly and every
other check records ``skipped``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from policies.guardrails.base import PASS, CheckConfig, Decoder, Finding, RequestFacts
from policies.guardrails.engine import CheckSet, TextOutcome
from policies.guardrails.verdict import SEVERITY, GuardrailViolation, Verdict

Item = str | list[int]


@dataclass(slots=True)
class InputOutcome:
    prompt: Any  # what to send upstream: the original object when nothing changed
    verdicts: list[Verdict] = field(default_factory=list)
    denied: Verdict | None = None
    max_tokens: int | None = None  # set when a length cap clamped the request's max_tokens
    texts: tuple[str, ...] = ()  # the prompts as (redacted) text, for output checks' RequestFacts.prompts
    changed: bool = False

    def error(self) -> GuardrailViolation:
        assert self.denied is not None
        return GuardrailViolation(self.denied)


class InputGuard:
    def __init__(self, checks: Sequence[CheckConfig]) -> None:
        self._set = CheckSet(checks, "input")

    def __bool__(self) -> bool:
        return bool(self._set)

    async def check(self, prompt: Any, facts: RequestFacts, decoder: Decoder | None = None) -> InputOutcome:
        items, listed = _items(prompt)
        results: list[TextOutcome] = []
        for position, item in enumerate(items):
            index = position if listed else None
            text, undecodable = _as_text(item, decoder)
            if text is None:
                result = self._tokens_only(item, facts, index, undecodable)
            elif self._set.async_checks:
                result = await self._set.run(text, facts, index)
            else:
                result = self._set.run_sync(text, facts, index)
            results.append(result)
            if result.denied is not None:
                break
        return _combine(prompt, items, listed, results)

    def _tokens_only(self, ids: Item, facts: RequestFacts, index: int | None, why: str) -> TextOutcome:
        outcome = TextOutcome("")
        for config in self._set.configs:
            if self._set.apply(outcome, config, _token_finding(self._set, config, len(ids), facts, why), index):
                break
        return outcome


def _token_finding(checks: CheckSet, config: CheckConfig, count: int, facts: RequestFacts, why: str) -> Finding:
    for check in checks.sync_checks:
        if check.config is config and hasattr(check, "evaluate_tokens"):
            found: Finding = check.evaluate_tokens(count, facts, "input")
            return found
    return Finding(hit=False, reason=why, status="skipped") if why else PASS


def _items(prompt: Any) -> tuple[list[Item], bool]:
    """The prompts to check, and whether the request gave a list of them (verdicts then carry an index)."""
    if prompt is None:
        return [], False
    if isinstance(prompt, str):
        return [prompt], False
    if prompt and all(isinstance(token, int) for token in prompt):
        return [prompt], False
    return list(prompt), True


def _as_text(item: Item, decoder: Decoder | None) -> tuple[str | None, str]:
    if isinstance(item, str):
        return item, ""
    if decoder is None:
        return None, "prompt given as token ids and the deployment has no tokenizer"
    try:
        return decoder(item), ""
    except Exception as exc:  # any tokenizer failure means "could not check": recorded as skipped
        return None, f"token ids could not be decoded ({type(exc).__name__})"


def _combine(prompt: Any, items: list[Item], listed: bool, results: list[TextOutcome]) -> InputOutcome:
    outcome = InputOutcome(prompt, _worst(results))
    outcome.denied = next((r.denied for r in results if r.denied is not None), None)
    clamps = [r.max_tokens for r in results if r.max_tokens is not None]
    outcome.max_tokens = min(clamps) if clamps else None
    texts = [r.text if isinstance(item, str) or r.text else item for r, item in zip(results, items, strict=False)]
    outcome.texts = tuple(t for t in texts if isinstance(t, str))
    if any(r.changed for r in results) and outcome.denied is None:
        if len(outcome.texts) != len(items):  # a redacted list cannot mix text with undecodable token ids
            outcome.denied = Verdict(
                "guardrails", "input", "deny", "a prompt needs redaction but another could not be decoded"
            )
            return outcome
        outcome.changed = True
        outcome.prompt = list(outcome.texts) if listed else outcome.texts[0]
    return outcome


def _worst(results: list[TextOutcome]) -> list[Verdict]:
    if len(results) == 1:
        return results[0].verdicts
    worst: dict[str, Verdict] = {}
    for result in results:
        for verdict in result.verdicts:
            seen = worst.get(verdict.check)
            if seen is None or SEVERITY[verdict.verdict] > SEVERITY[seen.verdict]:
                worst[verdict.check] = verdict
    return list(worst.values())
