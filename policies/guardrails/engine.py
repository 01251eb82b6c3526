"""Running a list of checks over one text: the part input, output and end-of-stream share.

Pattern checks (`SpanCheck`) run first, all on one folding of the original text, and their
redactions are applied together; whole-text checks then run in config order on the redacted text,
the synchronous ones before the asynchronous (webhook) ones. The first deny stops the run. Only
`run` is a coroutine, and it awaits nothing unless an asynchronous check is configured or the
text is longer than `LARGE_TEXT` characters: the synchronous checks of such a text run in a worker
thread (`asyncio.to_thread`), so that a multi-megabyte prompt does not hold the event loop.
A JSON text (`json=True`, a tool call's arguments) is redacted so that it stays JSON (`json_text`);
a match no placeholder can replace there denies.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

from policies.guardrails.base import CheckConfig, Finding, RequestFacts, SpanCheck, TextCheck, merge, redact
from policies.guardrails.json_text import JsonRedactor, check_view, is_json
from policies.guardrails.normalize import fold
from policies.guardrails.verdict import Outcome, Stage, Verdict

LARGE_TEXT = 64 * 1024  # characters: longer texts are checked off the event loop


@dataclass(slots=True)
class TextOutcome:
    text: str
    verdicts: list[Verdict] = field(default_factory=list)
    denied: Verdict | None = None
    deny_status: int | None = None
    max_tokens: int | None = None  # clamped by a length cap that redacts
    changed: bool = False


def make_verdict(
    config: CheckConfig, finding: Finding, stage: Stage, index: int | None, *, spans: bool = False
) -> Verdict:
    outcome: Outcome
    if finding.status == "skipped":
        outcome = "skipped"
    elif not finding.hit:
        outcome = "error" if finding.status == "error" else "pass"
    elif config.action == "redact" and not spans and finding.text is None and finding.max_tokens is None:
        outcome = "deny"  # told to redact, but nothing says how (a remote hit with no text, or a failure)
    else:
        outcome = config.action
    return Verdict(config.label, stage, outcome, finding.reason, index, finding.score, finding.labels)


class CheckSet:
    def __init__(self, configs: Sequence[CheckConfig], stage: Stage) -> None:
        self.stage = stage
        built: list[Any] = [config.build() for config in configs]
        self.span_checks: list[SpanCheck] = [c for c in built if hasattr(c, "spans")]
        text_checks: list[TextCheck] = [c for c in built if not hasattr(c, "spans")]
        self.sync_checks = [c for c in text_checks if not c.is_async]
        self.async_checks = [c for c in text_checks if c.is_async]
        self.configs = [cast(CheckConfig, c.config) for c in built]

    def without(self, kinds: Collection[str]) -> CheckSet:
        """These checks but those of `kinds`, sharing the built checks (a model loads once)."""
        narrowed = object.__new__(CheckSet)
        narrowed.stage = self.stage
        narrowed.span_checks = [c for c in self.span_checks if c.config.check not in kinds]
        narrowed.sync_checks = [c for c in self.sync_checks if c.config.check not in kinds]
        narrowed.async_checks = [c for c in self.async_checks if c.config.check not in kinds]
        narrowed.configs = [c for c in self.configs if c.check not in kinds]
        return narrowed

    def __bool__(self) -> bool:
        return bool(self.configs)

    async def run(self, text: str, facts: RequestFacts, index: int | None, *, json: bool = False) -> TextOutcome:
        if len(text) > LARGE_TEXT and (self.span_checks or self.sync_checks):
            outcome = await asyncio.to_thread(self.run_sync, text, facts, index, json)
        else:
            outcome = self.run_sync(text, facts, index, json=json)
        if self.async_checks and outcome.denied is None:
            for check in self.async_checks:
                finding = await check.evaluate_async(outcome.text, facts, self.stage, index or 0)
                if self.apply(outcome, check.config, finding, index):
                    break
        return _still_json(text, outcome) if json else outcome

    def run_sync(self, text: str, facts: RequestFacts, index: int | None, json: bool = False) -> TextOutcome:
        outcome = TextOutcome(text)
        if self.span_checks and self._spans(outcome, index, json):
            return outcome
        for check in self.sync_checks:
            if self.apply(outcome, check.config, check.evaluate(outcome.text, facts, self.stage, index or 0), index):
                break
        return _still_json(text, outcome) if json else outcome

    def _spans(self, outcome: TextOutcome, index: int | None, json: bool) -> bool:
        folded = fold(check_view(outcome.text) if json else outcome.text)
        redactions: list[tuple[int, int, str]] = []
        redacting: list[Verdict] = []
        for check in self.span_checks:
            spans = check.spans(folded)
            finding = check.judge(spans)
            verdict = make_verdict(check.config, finding, self.stage, index, spans=True)
            outcome.verdicts.append(verdict)
            if verdict.verdict == "deny":
                outcome.denied, outcome.deny_status = verdict, check.config.deny_status
                return True
            if finding.hit and check.config.action == "redact":
                redactions.extend((s.start, s.end, check.placeholder(s)) for s in spans)
                redacting.append(verdict)
        if not redactions:
            return False
        redacted = JsonRedactor().redact(outcome.text, merge(redactions), final=True) if json else None
        if json and redacted is None:
            outcome.denied = unplaceable(redacting[0])
            outcome.verdicts[outcome.verdicts.index(redacting[0])] = outcome.denied
            return True
        outcome.text = redacted if redacted is not None else redact(outcome.text, merge(redactions))
        outcome.changed = True
        return False

    def apply(self, outcome: TextOutcome, config: CheckConfig, finding: Finding, index: int | None) -> bool:
        """Record a whole-text finding; True when it denied (the run stops)."""
        verdict = make_verdict(config, finding, self.stage, index)
        outcome.verdicts.append(verdict)
        if verdict.verdict == "deny":
            outcome.denied, outcome.deny_status = verdict, config.deny_status
            return True
        if verdict.verdict == "redact":
            if finding.text is not None and finding.text != outcome.text:
                outcome.text, outcome.changed = finding.text, True
            if finding.max_tokens is not None:
                outcome.max_tokens = finding.max_tokens
        return False


def unplaceable(verdict: Verdict) -> Verdict:
    """A redaction that no placeholder can make in a JSON text, as the deny it becomes."""
    return replace(verdict, verdict="deny", reason=f"{verdict.reason}; no placeholder keeps the JSON valid")


def _still_json(original: str, outcome: TextOutcome) -> TextOutcome:
    """A whole-text check's rewrite (a webhook's text, a length cut) must leave a JSON text JSON."""
    if outcome.denied is not None or not outcome.changed or is_json(outcome.text) or not is_json(original):
        return outcome
    at = max(i for i, verdict in enumerate(outcome.verdicts) if verdict.verdict == "redact")
    outcome.denied = replace(outcome.verdicts[at], verdict="deny", reason="its rewrite is not valid JSON")
    outcome.verdicts[at] = outcome.denied
    return outcome
