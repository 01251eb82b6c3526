"""Output guardrails on a stream, applied as the text flows.

Per choice, the guard keeps the text it has not released yet (``pending``) and a little of what it
released (``left``, context for look-behinds and word boundaries). On each delta it rescans
``left + pending`` with every pattern check and releases everything except:
- the trailing characters a match could still extend into: each check's `hold` (its longest match,
  or the trailing whitespace-free run for whitespace-free entities such as e-mail addresses);
- any match that reaches into that tail, from its start (it may still grow).
Settled matches are redacted in the released text, so an e-mail split over three chunks comes out
as ``[EMAIL]``; a settled match of a deny check stops the choice before its text is released: the
step says ``finish_reason="content_filter"`` and nothing more of that choice is ever released. A
length limit is enforced on the released count (deny: stop; redact: truncate, ``finish_reason="length"``).

Whole-text checks (json, grounded, webhook) can only judge the finished text. If one of them may
deny or redact, the guard *buffers* each choice and releases it at the end, all at once, checked:
streaming is given up for correctness, never the reverse (`OutputGuard.buffers_streams` says so at
config time). If they only flag, the text streams and they run at the end, their verdicts in the
final chunk. The work per delta is synchronous: no task, await or log call per chunk.

Each text has a `TextKind` (see `output_guard`), given when it is first fed: a ``json`` text is
unescaped as it flows (an escape split across deltas waits for its end) and redacted so that it
stays JSON (a match no placeholder can replace there stops it as a deny would).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from policies.guardrails.base import Finding, RequestFacts, Span, TextKind, merge, redact
from policies.guardrails.engine import CheckSet, make_verdict, unplaceable
from policies.guardrails.json_text import JsonRedactor, Unescaper, check_view
from policies.guardrails.normalize import Folded, fold
from policies.guardrails.verdict import Verdict

LEFT = 128  # released characters kept as matching context


@dataclass(frozen=True, slots=True)
class StreamStep:
    text: str = ""  # release this now (may be empty)
    finish_reason: str | None = None  # set: end this choice now with this finish_reason
    denied: Verdict | None = None


EMPTY = StreamStep()


@dataclass(slots=True)
class _Choice:
    hits: list[list[Span]]
    emitted: list[str] | None  # released text, kept only when end checks need it
    answer: bool = True  # the choice's answer (every check), or another of its texts (`ANSWER_ONLY` aside)
    unescaper: Unescaper | None = None  # JSON texts
    redactor: JsonRedactor | None = None
    pending: str = ""
    left: str = ""
    sent: int = 0
    stopped: bool = False
    finished: bool = False
    denied: Verdict | None = None
    others: dict[str, Verdict] = field(default_factory=dict)  # verdicts of non-pattern checks


class StreamGuard:
    def __init__(self, checks: CheckSet, facts: RequestFacts, *, buffered: bool, aside: CheckSet | None = None) -> None:
        """`aside`: the checks of texts other than the answer (the same span checks)."""
        self._set = checks
        self._aside = aside or checks
        self._facts = facts
        self._buffered = buffered
        limits = [(c, getattr(c, "char_limit", None)) for c in checks.sync_checks]
        self._limits = [(check, limit) for check, limit in limits if isinstance(limit, int)]
        self._end = [c for c in checks.sync_checks + checks.async_checks if not hasattr(c, "char_limit")]
        aside_checks = self._aside.sync_checks + self._aside.async_checks
        self._end_aside = [c for c in aside_checks if not hasattr(c, "char_limit")]
        self._choices: dict[int, _Choice] = {}

    def _choice(self, index: int, kind: TextKind = "answer") -> _Choice:
        choice = self._choices.get(index)
        if choice is None:
            keep = bool(self._end if kind == "answer" else self._end_aside) and not self._buffered
            choice = self._choices[index] = _Choice([[] for _ in self._set.span_checks], [] if keep else None)
            choice.answer = kind == "answer"
            if kind == "json":
                choice.unescaper, choice.redactor = Unescaper(), JsonRedactor()
        return choice

    def feed(self, index: int, delta: str, kind: TextKind = "answer") -> StreamStep:
        """A delta of text `index` (a choice's, or one of a choice's texts); returns what may be
        released now. `kind`: the text's, from its first delta on."""
        choice = self._choice(index, kind)
        if choice.stopped or choice.finished:
            return EMPTY
        if choice.unescaper is not None:
            delta = choice.unescaper.feed(delta)
        if not delta:
            return EMPTY
        choice.pending += delta
        return EMPTY if self._buffered else self._advance(index, choice, final=False)

    async def finish(self, index: int) -> StreamStep:
        """The upstream ended choice `index`: release the rest, after the end-of-text checks."""
        choice = self._choice(index)
        if choice.stopped or choice.finished:
            return EMPTY
        choice.finished = True
        if choice.unescaper is not None:
            choice.pending += choice.unescaper.feed("", final=True)
        if self._buffered:
            checks = self._set if choice.answer else self._aside
            result = await checks.run(choice.pending, self._facts, index, json=choice.redactor is not None)
            choice.others = {v.check: v for v in result.verdicts}
            if result.denied is not None:
                return self._stop(choice, result.denied, "content_filter")
            return StreamStep(result.text)
        step = self._advance(index, choice, final=True)
        if step.finish_reason is None:
            for check, _ in self._limits:
                choice.others.setdefault(check.config.label, Verdict(check.config.label, "output", "pass", index=index))
            if choice.emitted is not None:
                await self._end_checks(index, "".join(choice.emitted), choice)
        return step

    def verdicts(self) -> list[Verdict]:
        """Every verdict so far, by choice: for the final chunk's ``guardrail_results``."""
        out: list[Verdict] = []
        for index in sorted(self._choices):
            choice = self._choices[index]
            if self._buffered:
                out.extend(choice.others.values())
                continue
            for check, hits in zip(self._set.span_checks, choice.hits, strict=True):
                label = check.config.label
                if choice.denied is not None and choice.denied.check == label:
                    out.append(choice.denied)
                else:
                    out.append(make_verdict(check.config, check.judge(hits), "output", index, spans=True))
            out.extend(choice.others.values())
        return out

    def _advance(self, index: int, choice: _Choice, *, final: bool) -> StreamStep:
        window = choice.left + choice.pending
        base = len(choice.left)
        folded = fold(check_view(window) if choice.redactor is not None else window)
        found = [check.spans(folded) for check in self._set.span_checks]
        cut = len(window) if final else self._cut(folded, found, base)
        redactions: list[tuple[int, int, str]] = []
        redacting: list[Verdict] = []
        for check, spans, hits in zip(self._set.span_checks, found, choice.hits, strict=True):
            settled = [s for s in spans if base < s.end <= cut]
            if not settled:
                continue
            hits.extend(settled)
            finding = check.judge(hits)
            if finding.hit and check.config.action == "deny":
                verdict = make_verdict(check.config, finding, "output", index, spans=True)
                return self._stop(choice, verdict, "content_filter")
            if finding.hit and check.config.action == "redact":
                redactions.extend((max(s.start, base) - base, s.end - base, check.placeholder(s)) for s in settled)
                redacting.append(make_verdict(check.config, finding, "output", index, spans=True))
        if choice.redactor is not None:
            placed = choice.redactor.redact(window[base:cut], merge(redactions), final=final)
            if placed is None:
                return self._stop(choice, unplaceable(redacting[0]), "content_filter")
            text = placed
        else:
            text = redact(window[base:cut], merge(redactions))
        choice.left, choice.pending = window[max(0, cut - LEFT) : cut], window[cut:]
        return self._release(index, choice, text)

    def _cut(self, folded: Folded, found: list[list[Span]], base: int) -> int:
        """Where released text ends: before the held tail, and before any match reaching into it."""
        hold = max((check.hold(folded.text) for check in self._set.span_checks), default=0)
        cut = max(base, folded.span(max(0, len(folded.text) - hold), len(folded.text))[0])
        spans = sorted((s for spans in found for s in spans), key=lambda s: s.start)
        moved = True
        while moved:
            moved = False
            for span in spans:
                if span.start < cut < span.end and max(span.start, base) < cut:
                    cut, moved = max(span.start, base), True
        return cut

    def _release(self, index: int, choice: _Choice, text: str) -> StreamStep:
        for check, limit in self._limits:
            if choice.sent + len(text) <= limit:
                continue
            finding = Finding(hit=True, reason=f"output exceeds {limit} characters", labels=("chars",))
            verdict = make_verdict(check.config, finding, "output", index, spans=True)
            choice.others[verdict.check] = verdict
            if verdict.verdict == "deny":
                return self._stop(choice, verdict, "content_filter")
            if verdict.verdict == "redact":
                choice.stopped = True
                return StreamStep(text[: max(0, limit - choice.sent)], "length")
        choice.sent += len(text)
        if choice.emitted is not None:
            choice.emitted.append(text)
        return StreamStep(text) if text else EMPTY

    def _stop(self, choice: _Choice, verdict: Verdict, reason: str) -> StreamStep:
        choice.stopped, choice.denied, choice.pending = True, verdict, ""
        return StreamStep("", reason, verdict)

    async def _end_checks(self, index: int, text: str, choice: _Choice) -> None:
        for check in self._end if choice.answer else self._end_aside:
            finding = await self._set.judge(check, text, self._facts, index)
            verdict = make_verdict(check.config, finding, "output", index)
            choice.others[verdict.check] = verdict
