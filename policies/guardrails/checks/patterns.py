"""`regex`: deny patterns, with allow patterns as exceptions.

A deny match is a violation unless an allow match covers it (``deny: ['\\b\\d{16}\\b'], allow:
['4111111111111111']`` denies card-like numbers except the well-known test card). ``pattern`` is
shorthand for a single deny pattern. Patterns match the folded text by default (see `normalize`),
so write them in lower case; their non-ASCII letters are folded the same way (``café`` finds
``CAFÉ``, a Korean word finds itself); ``fold: false`` matches the original text instead. Patterns
with nested quantifiers are refused when the config loads (catastrophic backtracking).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from pydantic import Field, field_validator, model_validator

from policies.guardrails.base import CheckConfig, Finding, Span, any_hit
from policies.guardrails.normalize import Folded, fold_pattern
from policies.guardrails.regex_safety import backtracking_risk, max_width

_ESCAPES = re.compile(r"\\.")


def vet_pattern(pattern: str) -> str:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"invalid regular expression {pattern!r}: {exc}") from exc
    if backtracking_risk(pattern):
        raise ValueError(f"pattern {pattern!r} nests quantifiers (catastrophic backtracking); rewrite it")
    return pattern


def for_folded(pattern: str, folded: bool) -> str:
    """The pattern to run on folded text: its non-ASCII literals folded like the text; a leading
    ``(?i)`` dropped, being redundant on case-folded text and defeating `re`'s literal-prefix search."""
    if not folded:
        return pattern
    pattern = fold_pattern(pattern)
    if pattern.startswith("(?i)") and not any(c.isupper() for c in _ESCAPES.sub("", pattern[4:])):
        return pattern[4:]
    return pattern


class RegexConfig(CheckConfig):
    check: Literal["regex"]
    # A regular expression (checked for catastrophic backtracking at load).
    pattern: str | None = None
    # Patterns that are hits.
    deny: list[str] = Field(default_factory=list)
    # Patterns whose matches are never hits (exceptions to deny).
    allow: list[str] = Field(default_factory=list)
    # Match against the folded text (case, accents, look-alike characters, invisible characters).
    fold: bool = True
    # What a redacted match becomes.
    placeholder: str = "[REDACTED]"
    max_match: int = Field(default=256, ge=1, le=4096)  # stream hold-back for patterns with no bounded width

    @field_validator("pattern")
    @classmethod
    def _vet_one(cls, value: str | None) -> str | None:
        return None if value is None else vet_pattern(value)

    @field_validator("deny", "allow")
    @classmethod
    def _vet_all(cls, value: list[str]) -> list[str]:
        return [vet_pattern(p) for p in value]

    @model_validator(mode="after")
    def _has_deny(self) -> RegexConfig:
        if self.pattern is None and not self.deny:
            raise ValueError("a regex check needs `pattern` or `deny`")
        return self

    def build(self) -> RegexCheck:
        return RegexCheck(self)


class RegexCheck:
    def __init__(self, config: RegexConfig) -> None:
        self.config = config
        sources = ([config.pattern] if config.pattern else []) + config.deny
        deny = [for_folded(p, config.fold) for p in sources]
        allow = [for_folded(p, config.fold) for p in config.allow]
        self._deny = [re.compile(p) for p in deny]
        self._allow = [re.compile(p) for p in allow]
        widths = [max_width(p) for p in deny + allow]
        self._window = max((w if w is not None else config.max_match) for w in widths) + 1

    def spans(self, folded: Folded) -> list[Span]:
        text = folded.text if self.config.fold else folded.source
        found: list[Span] = []
        for number, pattern in enumerate(self._deny, 1):
            for match in pattern.finditer(text):
                if match.end() > match.start():
                    start, end = self._original(folded, match.start(), match.end())
                    found.append(Span(start, end, f"deny pattern {number}"))
        if found and self._allow:
            allowed = [self._original(folded, *m.span()) for p in self._allow for m in p.finditer(text)]
            found = [s for s in found if not any(a <= s.start and s.end <= b for a, b in allowed)]
        return found

    def _original(self, folded: Folded, start: int, end: int) -> tuple[int, int]:
        return folded.span(start, end) if self.config.fold else (start, end)

    def judge(self, spans: Sequence[Span]) -> Finding:
        return any_hit(spans, "matched")

    def hold(self, folded: str) -> int:
        return self._window

    def placeholder(self, span: Span) -> str:
        return self.config.placeholder
