"""`grounded`: is the answer relevant to the prompt, and supported by the request's ``context``?

The method is lexical, deterministic and cheap (no model on the gateway's hot path):
1. Content words: the folded text split into words (numbers kept whole: ``23.5``, ``1,200``),
   stop words dropped, common suffixes stripped (``-s``, ``-es``, ``-ies``, ``-ing``, ``-ed``, ``-ly``).
2. Support (hallucination check, needs ``context``): ``0.5 * unigram + 0.5 * bigram``, where
   unigram is the share of the answer's distinct content words found in the context and bigram the
   share of the answer's adjacent content-word pairs found adjacent in the context. It is then
   multiplied by the share of the answer's numbers that occur in the context: an invented figure
   is the commonest hallucination and one wrong number must count heavily.
3. Relevancy: the share of the answer's distinct content words found in the prompt or the context
   (an answer about something else shares almost none).
The check hits when support < ``min_score`` (only when a context is given) or relevancy <
``min_relevancy``. ``score`` reports support, or relevancy when there is no context. The labelled
set in ``tests/data/grounding_set.json`` (44 answers, 27 ungrounded) measures it: precision/recall
of "ungrounded" are printed by its test. Known misses, kept in the set on purpose: a paraphrase
that shares no words with the context is flagged, and a wrong claim built only from the context's
own words and numbers passes.
"""

from __future__ import annotations

import re
from itertools import pairwise
from typing import ClassVar, Literal

from pydantic import Field

from policies.guardrails.base import PASS, CheckConfig, Finding, RequestFacts
from policies.guardrails.normalize import fold
from policies.guardrails.verdict import Stage

_WORDS = re.compile(r"[^\W_]+(?:[.,][0-9]+)*")
_SUFFIXES = ("ies", "es", "s", "ing", "ed", "ly")
_STOP = """a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have
    having he her here hers herself him himself his how i if in into is it its itself just me more most my
    myself no nor not now of off on once only or other our ours ourselves out over own same she should so
    some such than that the their theirs them themselves then there these they this those through to too
    under until up very was we were what when where which while who whom why will with would you your
    yours yourself yourselves also may might must shall yes according based answer question context
    text document"""
STOP_WORDS = frozenset(_STOP.split())


def content_words(text: str) -> list[str]:
    return [_stem(word) for word in _WORDS.findall(fold(text).text) if word not in STOP_WORDS]


def _stem(word: str) -> str:
    if word[0].isdigit():
        return word.replace(",", "")
    for suffix in _SUFFIXES:
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return word


def support(answer: list[str], context: list[str]) -> float:
    if not answer:
        return 1.0
    known = set(context)
    words = set(answer)
    unigram = len(words & known) / len(words)
    pairs = set(pairwise(answer))
    bigram = len(pairs & set(pairwise(context))) / len(pairs) if pairs else unigram
    numbers = {w for w in words if w[0].isdigit()}
    numeric = len(numbers & known) / len(numbers) if numbers else 1.0
    return (0.5 * unigram + 0.5 * bigram) * numeric


def relevancy(answer: list[str], prompt: list[str], context: list[str]) -> float:
    words = set(answer)
    if not words:
        return 0.0
    return len(words & (set(prompt) | set(context))) / len(words)


class GroundedConfig(CheckConfig):
    actions: ClassVar[frozenset[str]] = frozenset({"deny", "flag"})
    stages: ClassVar[frozenset[str]] = frozenset({"output"})

    check: Literal["grounded"]
    min_score: float = Field(default=0.45, ge=0.0, le=1.0)  # support by the context
    # An answer sharing less than this with its prompt's sources is a hit.
    min_relevancy: float = Field(default=0.3, ge=0.0, le=1.0)

    def build(self) -> GroundedCheck:
        return GroundedCheck(self)


class GroundedCheck:
    is_async = False
    needs_text = True

    def __init__(self, config: GroundedConfig) -> None:
        self.config = config

    def evaluate(self, text: str, facts: RequestFacts, stage: Stage, index: int) -> Finding:
        answer = content_words(text)
        prompt = content_words(facts.prompt_for(index))
        context = content_words(facts.context) if facts.context else []
        if not answer:
            return PASS
        rel = relevancy(answer, prompt, context)
        if rel < self.config.min_relevancy:
            return Finding(
                hit=True, reason=f"relevancy {rel:.2f} < {self.config.min_relevancy}", score=rel, labels=("relevancy",)
            )
        if facts.context is None:
            return Finding(hit=False, score=rel, reason="no context given: relevancy only")
        sup = support(answer, context)
        if sup < self.config.min_score:
            return Finding(
                hit=True, reason=f"support {sup:.2f} < {self.config.min_score}", score=sup, labels=("support",)
            )
        return Finding(hit=False, score=sup)

    async def evaluate_async(self, text: str, facts: RequestFacts, stage: Stage, index: int) -> Finding:
        return self.evaluate(text, facts, stage, index)
