"""Running a list of checks over the texts of a request: the part input, output and end-of-stream share.

Per text, pattern checks (`SpanCheck`) run first, all on one folding of the original text, and
their redactions are applied together; whole-text checks then run in config order on the redacted
text, the synchronous ones before the remote ones (webhook, classifier). The first deny stops the
text's run; on input (``first_deny``) it stops the request's.

A request's texts are checked together (`run_batch`), so that their number multiplies no cost:
- The synchronous checks go through the texts in slices of at most `SLICE_TEXTS` texts and
  `SLICE_CHARS` characters; between two slices the event loop runs other work, and a text longer
  than `LARGE_TEXT` is checked in a worker thread (`asyncio.to_thread`). A request whose texts fit
  one slice awaits nothing.
- Each remote check then judges the texts still standing in one `evaluate_batch`, its
  `texts_per_call` to a call, within the request's bounds (`bounds`): at most ``max_calls`` calls
  per request and stage (input beyond: refused before any call; output beyond: the check's failure
  verdict), and no waiting past the stage's ``deadline_ms`` (the check's failure verdict).

A JSON text (``json``, a tool call's arguments) is judged as the JSON value it spells and redacted
so that it stays JSON (`json_text`); a match no placeholder can replace there denies.

On input, what the pattern checks made of a text (their verdicts, the deny, the redactions) is
remembered per caller (`SpanMemo`, when `RequestFacts.scope` names one): a chat re-sends its system
prompt and every earlier message on each turn, and those are not judged again. The pattern checks
read nothing but the text, so the result is the one a new judgement would give; whole-text checks
(length, webhook, classifier) still run every time. The memo is keyed by the caller and a 128-bit
BLAKE2b digest of the text (it keeps no prompt text: the redactions are offsets and placeholders),
bounded to `MEMO_ENTRIES` per check set, least recently used first out; per caller, so that how fast
a request is answered tells no one whether another tenant sent the same text.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import OrderedDict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

from policies.guardrails.base import (
    CheckConfig,
    Finding,
    RemoteCheck,
    RequestFacts,
    SpanCheck,
    TextCheck,
    merge,
    redact,
)
from policies.guardrails.bounds import DEADLINE_PASSED, DEFAULT_BOUNDS, GuardrailBounds
from policies.guardrails.json_text import JsonRedactor, check_view, is_json
from policies.guardrails.normalize import fold
from policies.guardrails.verdict import Outcome, Stage, Verdict

LARGE_TEXT = 64 * 1024  # characters: longer texts are checked off the event loop
SLICE_CHARS = LARGE_TEXT  # characters of synchronous checking between two turns of the event loop
SLICE_TEXTS = 256  # texts likewise (each text has a cost of its own besides its characters)
TOO_LARGE = "request_too_large"  # the error code of an input refused by `max_calls`
MEMO_ENTRIES = 4096  # texts whose pattern-check results an input check set remembers (about 1 KB each)


@dataclass(slots=True)
class TextOutcome:
    text: str
    verdicts: list[Verdict] = field(default_factory=list)
    denied: Verdict | None = None
    deny_status: int | None = None
    max_tokens: int | None = None  # clamped by a length cap that redacts
    changed: bool = False
    json: bool = False  # a JSON text: judged as the value it spells, redacted so that it stays JSON


@dataclass(frozen=True, slots=True)
class SpanResult:
    """What the pattern checks made of one text: their verdicts (at the index the text had then),
    whether the last denied (and with which status), the redactions (original offsets, placeholders)."""

    verdicts: tuple[Verdict, ...]
    denied: bool = False
    deny_status: int | None = None
    redactions: tuple[tuple[int, int, str], ...] = ()


class SpanMemo:
    """`SpanResult`s by caller and text digest, the least recently used dropped past `MEMO_ENTRIES`.
    Used on the event loop only (texts checked in a worker thread are too long to be remembered)."""

    def __init__(self, entries: int = MEMO_ENTRIES) -> None:
        self.entries = entries
        self._results: OrderedDict[tuple[str, bytes], SpanResult] = OrderedDict()

    @staticmethod
    def key(scope: str, text: str) -> tuple[str, bytes]:
        return scope, hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()

    def get(self, key: tuple[str, bytes]) -> SpanResult | None:
        found = self._results.get(key)
        if found is not None:
            self._results.move_to_end(key)
        return found

    def put(self, key: tuple[str, bytes], result: SpanResult) -> None:
        self._results[key] = result
        if len(self._results) > self.entries:
            self._results.popitem(last=False)


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
    def __init__(self, configs: Sequence[CheckConfig], stage: Stage, bounds: GuardrailBounds = DEFAULT_BOUNDS) -> None:
        self.stage = stage
        self.bounds = bounds
        built: list[Any] = [config.build() for config in configs]
        self.span_checks: list[SpanCheck] = [c for c in built if hasattr(c, "spans")]
        text_checks: list[TextCheck] = [c for c in built if not hasattr(c, "spans")]
        self.sync_checks = [c for c in text_checks if not c.is_async]
        self.async_checks: list[RemoteCheck] = [cast(RemoteCheck, c) for c in text_checks if c.is_async]
        self.configs = [cast(CheckConfig, c.config) for c in built]
        self.memo = SpanMemo() if stage == "input" and self.span_checks else None

    def without(self, kinds: Collection[str]) -> CheckSet:
        """These checks but those of `kinds`, sharing the built checks (a model loads once)."""
        narrowed = object.__new__(CheckSet)
        narrowed.stage = self.stage
        narrowed.bounds = self.bounds
        narrowed.span_checks = [c for c in self.span_checks if c.config.check not in kinds]
        narrowed.sync_checks = [c for c in self.sync_checks if c.config.check not in kinds]
        narrowed.async_checks = [c for c in self.async_checks if c.config.check not in kinds]
        narrowed.configs = [c for c in self.configs if c.check not in kinds]
        narrowed.memo = SpanMemo() if self.memo is not None and narrowed.span_checks else None
        return narrowed

    def __bool__(self) -> bool:
        return bool(self.configs)

    async def run(self, text: str, facts: RequestFacts, index: int | None, *, json: bool = False) -> TextOutcome:
        return (await self.run_batch([text], facts, [index], jsons=(json,)))[0]

    async def run_batch(
        self,
        texts: Sequence[str],
        facts: RequestFacts,
        indexes: Sequence[int | None],
        *,
        first_deny: bool = False,
        jsons: Sequence[bool] | None = None,
    ) -> list[TextOutcome]:
        """Each text's outcome, in order. `first_deny` (input): the first deny ends the run, and texts
        past what `max_calls` lets a remote check take are refused before any work. `jsons`: which
        texts are JSON (none when not given)."""
        if not self.async_checks and len(texts) == 1 and len(texts[0]) <= LARGE_TEXT:
            # the usual request: nothing to slice
            return [self.run_sync(texts[0], facts, indexes[0], json=bool(jsons and jsons[0]))]
        outcomes = [
            TextOutcome(text, json=json) for text, json in zip(texts, jsons or [False] * len(texts), strict=True)
        ]
        await self._batch(outcomes, facts, indexes, first_deny)
        return [_still_json(text, o) if o.json else o for text, o in zip(texts, outcomes, strict=True)]

    async def _batch(
        self, outcomes: list[TextOutcome], facts: RequestFacts, indexes: Sequence[int | None], first_deny: bool
    ) -> list[TextOutcome]:
        if not outcomes:
            return outcomes
        if not self.async_checks:
            await self._sync(outcomes, facts, indexes, first_deny)
            return outcomes
        if first_deny and self._refuse_beyond_calls(outcomes, facts, indexes):
            return outcomes
        facts.work.begin()
        try:
            if (self.span_checks or self.sync_checks) and await self._sync(outcomes, facts, indexes, first_deny):
                return outcomes
            for check in self.async_checks:
                live = [i for i, outcome in enumerate(outcomes) if outcome.denied is None]
                if not live:
                    break
                found = await self._remote(check, [outcomes[i].text for i in live], facts, [indexes[i] for i in live])
                for i, finding in zip(live, found, strict=True):
                    if self.apply(outcomes[i], check.config, finding, indexes[i]) and first_deny:
                        return outcomes
        finally:
            facts.work.end()
        return outcomes

    async def judge(self, check: TextCheck, text: str, facts: RequestFacts, index: int) -> Finding:
        """One whole-text check on one text, within the request's bounds (the stream guard's end checks)."""
        if not check.is_async:
            return check.evaluate(text, facts, self.stage, index)
        facts.work.begin()
        try:
            return (await self._remote(cast(RemoteCheck, check), [text], facts, [index]))[0]
        finally:
            facts.work.end()

    def run_sync(self, text: str, facts: RequestFacts, index: int | None, json: bool = False) -> TextOutcome:
        outcome = TextOutcome(text, json=json)
        self._check_sync(outcome, facts, index)
        return _still_json(text, outcome) if json else outcome

    def _check_sync(self, outcome: TextOutcome, facts: RequestFacts, index: int | None) -> None:
        if self.span_checks and self._spans(outcome, index, facts.scope):
            return
        for check in self.sync_checks:
            if self.apply(outcome, check.config, check.evaluate(outcome.text, facts, self.stage, index or 0), index):
                return

    async def _sync(
        self, outcomes: list[TextOutcome], facts: RequestFacts, indexes: Sequence[int | None], first_deny: bool
    ) -> bool:
        """The synchronous checks, slice by slice; True when a deny ends the run."""
        start, count = 0, len(outcomes)
        while start < count:
            end, size = start, 0
            while end < count and end - start < SLICE_TEXTS:
                length = len(outcomes[end].text)
                if end > start and size + length > SLICE_CHARS:
                    break
                size, end = size + length, end + 1
            if start:
                await asyncio.sleep(0)  # the loop's other work runs between two slices
            if size > LARGE_TEXT:  # a single long text
                await asyncio.to_thread(self._check_sync, outcomes[start], facts, indexes[start])
            else:
                for i in range(start, end):
                    self._check_sync(outcomes[i], facts, indexes[i])
            if first_deny:
                for i in range(start, end):
                    if outcomes[i].denied is not None:
                        return True
            start = end
        return False

    def _room(self, check: RemoteCheck, facts: RequestFacts) -> int:
        """How many more texts of this request `check` may take under `max_calls`."""
        return max(0, self.bounds.max_calls - facts.work.calls.get(check.config.label, 0)) * check.texts_per_call

    def _refuse_beyond_calls(
        self, outcomes: list[TextOutcome], facts: RequestFacts, indexes: Sequence[int | None]
    ) -> bool:
        """Input: a request with more texts than a remote check may take is refused, naming the first one
        beyond (a 400 `request_too_large`), before any check runs."""
        for check in self.async_checks:
            room = self._room(check, facts)
            if len(outcomes) <= room:
                continue
            label, per_call = check.config.label, check.texts_per_call
            reason = (
                f"more texts to check than guardrail {label!r} takes per request: "
                f"{self.bounds.max_calls} calls of {per_call} text{'s' if per_call > 1 else ''} (guardrails.max_calls)"
            )
            denied = Verdict(label, self.stage, "deny", reason, indexes[room], code=TOO_LARGE)
            outcomes[room].verdicts.append(denied)
            outcomes[room].denied = denied
            return True
        return False

    async def _remote(
        self, check: RemoteCheck, texts: list[str], facts: RequestFacts, indexes: Sequence[int | None]
    ) -> list[Finding]:
        """`check`'s findings on `texts`: the ones within `max_calls` judged before the deadline, the
        others its failure verdict."""
        room = self._room(check, facts)
        taken = texts[:room]
        found: list[Finding] = []
        if taken:
            label = check.config.label
            facts.work.calls[label] = facts.work.calls.get(label, 0) + -(-len(taken) // check.texts_per_call)
            left = facts.work.left(self.bounds.deadline_s)
            if left > 0:
                deadline = asyncio.get_running_loop().time() + left
                found = await check.evaluate_batch(
                    taken, facts, self.stage, [index or 0 for index in indexes[:room]], deadline
                )
            else:
                found = [check.failure(DEADLINE_PASSED)] * len(taken)
        if len(texts) > room:
            over = f"past guardrails.max_calls ({self.bounds.max_calls} calls of this check per request)"
            found += [check.failure(over)] * (len(texts) - room)
        return found

    def _spans(self, outcome: TextOutcome, index: int | None, scope: str = "") -> bool:
        """The pattern checks on the text; True when one denied."""
        if outcome.json:
            return self._json_spans(outcome, index)
        memo = self.memo if scope and len(outcome.text) <= LARGE_TEXT else None
        key = memo.key(scope, outcome.text) if memo is not None else None
        result = memo.get(key) if memo is not None and key is not None else None
        if result is None:
            result = self._judge_spans(outcome.text, index)
            if memo is not None and key is not None:
                memo.put(key, result)
        outcome.verdicts += [v if v.index == index else v.placed(index, v.field) for v in result.verdicts]
        if result.denied:
            outcome.denied, outcome.deny_status = outcome.verdicts[-1], result.deny_status
            return True
        if result.redactions:
            outcome.text, outcome.changed = redact(outcome.text, result.redactions), True
        return False

    def _judge_spans(self, text: str, index: int | None) -> SpanResult:
        folded = fold(text)
        verdicts: list[Verdict] = []
        redactions: list[tuple[int, int, str]] = []
        for check in self.span_checks:
            spans = check.spans(folded)
            finding = check.judge(spans)
            verdict = make_verdict(check.config, finding, self.stage, index, spans=True)
            verdicts.append(verdict)
            if verdict.verdict == "deny":
                return SpanResult(tuple(verdicts), True, check.config.deny_status)
            if finding.hit and check.config.action == "redact":
                redactions.extend((s.start, s.end, check.placeholder(s)) for s in spans)
        return SpanResult(tuple(verdicts), redactions=tuple(merge(redactions)))

    def _json_spans(self, outcome: TextOutcome, index: int | None) -> bool:
        folded = fold(check_view(outcome.text))
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
        redacted = JsonRedactor().redact(outcome.text, merge(redactions), final=True)
        if redacted is None:
            outcome.denied = unplaceable(redacting[0])
            outcome.verdicts[outcome.verdicts.index(redacting[0])] = outcome.denied
            return True
        outcome.text, outcome.changed = redacted, True
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
