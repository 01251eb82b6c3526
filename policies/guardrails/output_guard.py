"""Output guardrails on a whole response, per choice, and the factory of stream guards.

    outcome = await guard.check([c.text for c in choices], facts)
    for choice, result in zip(choices, outcome.choices):
        if result.denied: choice.text, choice.finish_reason = "", "content_filter"
        else: choice.text = result.text
    if outcome.deny_status: raise GuardrailViolation(outcome.first_denied, status=outcome.deny_status)

Each choice is checked on its own (a deny withholds that choice only), all of them in one batch
per set of checks (see `engine`). ``deny_status`` is the 4xx
of the first denying check that sets one: the policy asked for an error response instead of
``content_filter``.

A choice may carry several texts (a chat answer's content, reasoning, refusal, tool-call
arguments), each checked on its own, each of a `TextKind`: ``answer`` (what the choice says: every
check), ``text`` (every check but those that judge the answer itself, `ANSWER_ONLY`: reasoning is
not JSON, a refusal is not grounded) or ``json`` (a tool call's arguments: those checks, on the
value a JSON parser reads, redacted so that it stays JSON; see `json_text`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from policies.guardrails.base import ANSWER_ONLY, CheckConfig, RequestFacts, TextKind
from policies.guardrails.bounds import DEFAULT_BOUNDS, GuardrailBounds
from policies.guardrails.engine import CheckSet, TextOutcome
from policies.guardrails.json_text import unescape
from policies.guardrails.stream_guard import StreamGuard
from policies.guardrails.verdict import Verdict

_END_OF_TEXT = {"json", "grounded", "webhook", "classifier"}


@dataclass(frozen=True, slots=True)
class ChoiceOutcome:
    index: int
    text: str  # the text to return (redacted when a check redacted); "" when denied
    denied: Verdict | None = None


@dataclass(slots=True)
class OutputOutcome:
    choices: list[ChoiceOutcome] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)
    deny_status: int | None = None

    @property
    def first_denied(self) -> Verdict | None:
        return next((c.denied for c in self.choices if c.denied is not None), None)


class OutputGuard:
    def __init__(self, checks: Sequence[CheckConfig], bounds: GuardrailBounds = DEFAULT_BOUNDS) -> None:
        self._set = CheckSet(checks, "output", bounds)
        self._aside = self._set.without(ANSWER_ONLY) if any(c.check in ANSWER_ONLY for c in checks) else self._set
        # An end-of-text check that may deny or redact makes streams buffer (see stream_guard).
        self.buffers_streams = any(c.check in _END_OF_TEXT and c.action != "flag" for c in checks)

    def __bool__(self) -> bool:
        return bool(self._set)

    async def check(
        self, texts: Sequence[str], facts: RequestFacts, kinds: Sequence[TextKind] | None = None
    ) -> OutputOutcome:
        """Each text on its own (`kinds`: each one's; all ``answer`` by default). A text comes back
        as it was unless a check changed it."""
        outcome = OutputOutcome()
        kinds = kinds if kinds is not None else ["answer"] * len(texts)
        results: list[TextOutcome | None] = [None] * len(texts)
        # One batch per set of checks: the answers get every check, the other texts those of `_aside`.
        answers = [i for i, kind in enumerate(kinds) if kind == "answer"]
        others = [i for i, kind in enumerate(kinds) if kind != "answer"]
        for checks, picked in ((self._set, answers), (self._aside, others)):
            if not picked:
                continue
            jsons = [kinds[i] == "json" for i in picked]
            seen = [unescape(texts[i]) if json else texts[i] for i, json in zip(picked, jsons, strict=True)]
            for i, checked in zip(picked, await checks.run_batch(seen, facts, picked, jsons=jsons), strict=True):
                results[i] = checked
        for index, (text, result) in enumerate(zip(texts, results, strict=True)):
            assert result is not None  # every text is an answer or another kind
            if not result.changed:
                result.text = text
            outcome.verdicts.extend(result.verdicts)
            if result.denied is not None:
                outcome.choices.append(ChoiceOutcome(index, "", result.denied))
                if outcome.deny_status is None:
                    outcome.deny_status = result.deny_status
            else:
                outcome.choices.append(ChoiceOutcome(index, result.text))
        return outcome

    def stream(self, facts: RequestFacts) -> StreamGuard:
        """A guard for one streamed response (all its choices)."""
        return StreamGuard(self._set, facts, buffered=self.buffers_streams, aside=self._aside)
