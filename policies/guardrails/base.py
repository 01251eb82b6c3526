"""The check protocol: what every guardrail check provides, and the facts a request gives them.

Two kinds of check:
- `SpanCheck` finds spans in folded text (regex, words, pii, injection). Pattern checks run
  incrementally on streams: `hold` says how many trailing folded characters a match could still
  extend into, so the stream guard holds back only those.
- `TextCheck` judges a whole text (length, json, grounded, webhook). `evaluate` is synchronous;
  `is_async` checks (webhook, classifier) are `RemoteCheck`s: they judge a request's texts
  together (`evaluate_batch`, `texts_per_call` of them per call), within a deadline.
A check returns a `Finding`; the evaluator turns it into a `Verdict` with the check's action.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator

from policies.guardrails.bounds import Work
from policies.guardrails.normalize import Folded
from policies.guardrails.verdict import Action, Stage

NAME_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
Decoder = Callable[[list[int]], str]  # token ids to text, from the deployment's tokenizer
# What an output text is (see `output_guard`): the answer itself, another text of the choice, or JSON.
TextKind = Literal["answer", "text", "json"]
ANSWER_ONLY = frozenset({"json", "grounded"})  # checks that judge the answer, not every text it carries


@dataclass(frozen=True, slots=True)
class Span:
    start: int  # original offsets
    end: int
    label: str  # entity or pattern name: reported, and used by placeholders
    weight: float = 1.0  # scored checks (injection)


@dataclass(frozen=True, slots=True)
class Finding:
    hit: bool
    reason: str | None = None
    score: float | None = None
    labels: tuple[str, ...] = ()
    text: str | None = None  # replacement for the whole text when a text check redacts it
    max_tokens: int | None = None  # the clamped max_tokens when a length cap redacts
    status: Literal["ok", "skipped", "error"] = "ok"


PASS = Finding(hit=False)


@dataclass(frozen=True, slots=True)
class RequestFacts:
    """What checks may read from the request besides the text itself. Make one per request and stage:
    it keeps the tally of that stage's guardrail work (`work`), which the request's bounds apply to."""

    max_tokens: int | None = None
    prompts: tuple[str, ...] = ()  # the prompt(s) as text: output relevancy compares against them
    n: int = 1  # choices per prompt: choice i answers prompts[i // n]
    context: str | None = None  # grounding document (`context` / `enkrypt_context`), never sent upstream
    # The caller (its cache scope): input pattern checks' results are remembered per caller (engine.SpanMemo)
    scope: str = ""
    work: Work = field(default_factory=Work, compare=False, repr=False)

    def prompt_for(self, choice: int) -> str:
        if not self.prompts:
            return ""
        return self.prompts[min(choice // max(self.n, 1), len(self.prompts) - 1)]


class CheckConfig(BaseModel):
    """Fields every check entry has; subclasses add `check: Literal[...]` and their own settings."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    actions: ClassVar[frozenset[str]] = frozenset({"deny", "redact", "flag"})
    stages: ClassVar[frozenset[str]] = frozenset({"input", "output"})

    # The kind of check: pii, injection, regex, words, length, json, grounded, classifier or webhook.
    check: str
    # What a hit does: deny (refuse), redact (rewrite the text), or flag (record only).
    action: Action
    name: str | None = Field(default=None, pattern=NAME_PATTERN)  # tells two checks of one kind apart
    deny_status: int | None = Field(default=None, ge=400, le=499)  # output deny, not streamed: this 4xx

    @model_validator(mode="after")
    def _action_allowed(self) -> CheckConfig:
        if self.action not in self.actions:
            allowed = ", ".join(sorted(self.actions))
            raise ValueError(f"check {self.check!r} cannot {self.action!r}; its actions are: {allowed}")
        return self

    @property
    def label(self) -> str:
        return self.name or self.check

    def build(self) -> Check:
        raise NotImplementedError


class SpanCheck(Protocol):
    @property
    def config(self) -> CheckConfig: ...

    def spans(self, folded: Folded) -> list[Span]: ...

    def judge(self, spans: Sequence[Span]) -> Finding: ...

    def hold(self, folded: str) -> int: ...

    def placeholder(self, span: Span) -> str: ...


class TextCheck(Protocol):
    is_async: bool
    needs_text: bool  # False: can judge a token-id prompt without decoding it

    @property
    def config(self) -> CheckConfig: ...

    def evaluate(self, text: str, facts: RequestFacts, stage: Stage, index: int) -> Finding: ...

    async def evaluate_async(self, text: str, facts: RequestFacts, stage: Stage, index: int) -> Finding: ...


class RemoteCheck(TextCheck, Protocol):
    """An asynchronous check that judges several texts per call (webhook, classifier)."""

    texts_per_call: int  # a request's texts are sent this many to a call

    async def evaluate_batch(
        self, texts: Sequence[str], facts: RequestFacts, stage: Stage, indexes: Sequence[int], deadline: float | None
    ) -> list[Finding]:
        """One finding per text; a text with no answer by `deadline` (event-loop time) gets `failure`."""
        ...

    def failure(self, reason: str) -> Finding:
        """The finding of a text this check could not judge: a hit unless the check fails open."""
        ...


Check = SpanCheck | TextCheck


def is_span_check(check: Any) -> bool:
    return hasattr(check, "spans")


def any_hit(spans: Sequence[Span], what: str) -> Finding:
    """The judgement of plain pattern checks: any span is a hit, reported by its distinct labels."""
    if not spans:
        return PASS
    labels = tuple(dict.fromkeys(span.label for span in spans))
    return Finding(hit=True, reason=f"{what}: {', '.join(labels)}", labels=labels)


def trailing_token(folded: str, cap: int) -> int:
    """Length of the trailing run without whitespace (at most `cap`): a whitespace-free match may grow there."""
    cut = max(folded.rfind(" "), folded.rfind("\n"), folded.rfind("\t"), folded.rfind("\r"))
    return min(len(folded) - cut - 1, cap)


def redact(text: str, spans: Sequence[tuple[int, int, str]]) -> str:
    """Replace original [start, end) ranges (sorted, non-overlapping) with their placeholders."""
    out: list[str] = []
    at = 0
    for start, end, placeholder in spans:
        out.append(text[at:start])
        out.append(placeholder)
        at = end
    out.append(text[at:])
    return "".join(out)


def merge(spans: Sequence[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """Sort and drop ranges overlapping an earlier-starting (or, at a tie, longer) one."""
    merged: list[tuple[int, int, str]] = []
    for start, end, placeholder in sorted(spans, key=lambda s: (s[0], -s[1])):
        if merged and start < merged[-1][1]:
            last = merged[-1]
            if end > last[1]:
                merged[-1] = (last[0], end, last[2])
            continue
        merged.append((start, end, placeholder))
    return merged
