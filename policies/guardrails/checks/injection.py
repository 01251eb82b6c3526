"""`injection`: prompt-injection heuristics, a scored pattern list with a threshold.

Each built-in pattern has a name and a weight (how strongly it alone suggests an attack); the
score of a text is the sum of the weights of the distinct patterns it matches, and the check hits
when the score reaches ``threshold`` (default 0.7: one strong signal such as "ignore previous
instructions", or two weaker ones such as "developer mode" + "jailbreak"). Patterns run on folded
text, so width, case and zero-width tricks do not hide them; words may be separated by up to three
non-word characters. Each pattern also has keywords, whole words one of which it cannot match
without: when none is among the text's words (a set lookup, far cheaper than a regex scan), the
pattern is not run. ``patterns`` adds operator patterns,
``disable`` turns built-ins off by name. Maintained list: `BUILTIN_PATTERNS` below.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from policies.guardrails.base import NAME_PATTERN, PASS, CheckConfig, Finding, Span
from policies.guardrails.checks.patterns import for_folded, vet_pattern
from policies.guardrails.normalize import Folded
from policies.guardrails.regex_safety import max_width

_S = r"\W{1,3}"  # between words: spaces, punctuation, a newline
_OPT = rf"(?:(?:all|any|the|your|my|these|those|of){_S}){{0,3}}"

# name: (pattern, weight, keywords)
BUILTIN_PATTERNS: dict[str, tuple[str, float, tuple[str, ...]]] = {
    "ignore_instructions": (
        rf"(?:ignore|disregard|forget|skip|override|bypass){_S}{_OPT}"
        rf"(?:(?:previous|prior|above|earlier|preceding|former|initial|original|system|safety){_S})?"
        r"(?:instructions?|prompts?|rules|directions|directives|guidelines|constraints|messages?)",
        0.8,
        ("ignore", "disregard", "forget", "skip", "override", "bypass"),
    ),
    "forget_everything": (rf"forget{_S}(?:everything|all){_S}(?:you|that|above|before|i)", 0.6, ("forget",)),
    "reveal_prompt": (
        rf"(?:reveal|show|print|repeat|output|display|leak|tell{_S}me){_S}(?:me{_S})?(?:your|the){_S}"
        rf"(?:(?:system|initial|original|hidden|secret|full){_S})(?:prompt|instructions|message)",
        0.8,
        ("prompt", "instructions", "message"),
    ),
    "role_override": (
        rf"you{_S}are{_S}(?:now{_S})?(?:no{_S}longer|dan\b|in{_S}developer|jailbroken|unrestricted|unfiltered|"
        rf"uncensored|free{_S}(?:from|of))",
        0.7,
        ("you",),
    ),
    "do_anything_now": (rf"do{_S}anything{_S}now", 0.8, ("anything",)),
    "special_mode": (rf"(?:developer|god|admin|debug|sudo|dan){_S}mode", 0.5, ("mode",)),
    "jailbreak": (r"jailbr(?:eak|oken)", 0.5, ("jailbreak", "jailbroken", "jailbreaking", "jailbreaks")),
    "persona": (
        rf"(?:pretend|act|behave|roleplay){_S}(?:to{_S}be|as{_S}if|as|like){_S}(?:an?{_S})?(?:you{_S}(?:are|were){_S})?"
        r"(?:unrestricted|unfiltered|uncensored|evil|an{_S}ai{_S}without|without)",
        0.5,
        ("pretend", "act", "behave", "roleplay"),
    ),
    "no_restrictions": (
        rf"(?:without|no|ignore|bypass|disable|remove){_S}(?:(?:any|all|your|the){_S})?"
        r"(?:restrictions|filters|limitations|safety|guardrails|censorship|content\W{1,3}polic(?:y|ies))",
        0.5,
        ("restrictions", "filters", "limitations", "safety", "guardrails", "censorship", "policy", "policies"),
    ),
    "new_instructions": (
        rf"(?:new|updated|real|actual|true){_S}(?:instructions|rules|task|system{_S}prompt)\W{{0,3}}:",
        0.5,
        ("instructions", "rules", "task", "prompt"),
    ),
    "special_tokens": (
        r"<\|(?:im_start|im_end|system|endoftext|start_header_id)\|>|\[/?inst\]|<<\/?sys>>",
        0.6,
        ("im_start", "im_end", "system", "endoftext", "start_header_id", "inst", "sys"),
    ),
    "fake_role_turn": (
        r"(?:^|\n)\W{0,3}(?:system|assistant|developer)\W{0,3}:",
        0.3,
        ("system", "assistant", "developer"),
    ),
    "system_prompt": (rf"system{_S}prompt", 0.3, ("system",)),
    "from_now_on": (rf"from{_S}now{_S}on", 0.3, ("now",)),
}


class InjectionPattern(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=NAME_PATTERN)
    pattern: str
    weight: float = Field(gt=0.0, le=1.0)

    @field_validator("pattern")
    @classmethod
    def _vet(cls, value: str) -> str:
        return vet_pattern(value)


class InjectionConfig(CheckConfig):
    actions: ClassVar[frozenset[str]] = frozenset({"deny", "flag"})

    check: Literal["injection"]
    threshold: float = Field(default=0.7, gt=0.0)
    patterns: list[InjectionPattern] = Field(default_factory=list)
    disable: list[str] = Field(default_factory=list)

    @field_validator("disable")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        unknown = sorted(set(value) - set(BUILTIN_PATTERNS))
        if unknown:
            raise ValueError(f"unknown built-in patterns {unknown}; known: {', '.join(BUILTIN_PATTERNS)}")
        return value

    def build(self) -> InjectionCheck:
        return InjectionCheck(self)


class InjectionCheck:
    def __init__(self, config: InjectionConfig) -> None:
        self.config = config
        rules = [(n, p, w, k) for n, (p, w, k) in BUILTIN_PATTERNS.items() if n not in config.disable]
        rules += [(extra.name, extra.pattern, extra.weight, ()) for extra in config.patterns]
        rules = [(name, for_folded(pattern, True), weight, keys) for name, pattern, weight, keys in rules]
        self._rules = [
            (name, re.compile(pattern), weight, frozenset(k.encode() for k in keys))
            for name, pattern, weight, keys in rules
        ]
        self._window = max((max_width(pattern) or 256) for _, pattern, _, _ in rules) + 1 if rules else 1

    def spans(self, folded: Folded) -> list[Span]:
        text, words = folded.text, folded.words
        found: list[Span] = []
        for name, pattern, weight, keys in self._rules:
            if keys and keys.isdisjoint(words):
                continue
            for match in pattern.finditer(text):
                found.append(Span(*folded.span(*match.span()), label=name, weight=weight))
        return found

    def judge(self, spans: Sequence[Span]) -> Finding:
        weights = {span.label: span.weight for span in spans}
        score = sum(weights.values())
        if score < self.config.threshold:
            return PASS if not weights else Finding(hit=False, score=score, labels=tuple(weights))
        reason = f"injection score {score:.2f} >= {self.config.threshold:.2f} ({', '.join(weights)})"
        return Finding(hit=True, reason=reason, score=score, labels=tuple(weights))

    def hold(self, folded: str) -> int:
        return self._window

    def placeholder(self, span: Span) -> str:
        return "[REDACTED]"
