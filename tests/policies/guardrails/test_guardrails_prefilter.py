"""The word prefilter of the injection check's branches (`regex_safety.required_words`): a branch is
skipped on a text that lacks a word every one of its matches would hold, so it must never claim a
word some match can do without (else the check would miss what it matched before)."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pytest

from policies.guardrails.checks.injection import signals
from policies.guardrails.normalize import fold
from policies.guardrails.regex_safety import _parser, required_words

CORPUS = Path(__file__).resolve().parents[2] / "data" / "guardrails"
BRANCHES = {pattern: needs for cue in signals.CUES for pattern, needs in cue.needs.items()}
WORD_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789_éж"
OTHER_CHARS = " \t\n.,;:!?'\"-()[]/*#=<>|\u2019"


def words(pattern: str, flags: int = 0) -> list[set[str]]:
    return [{word.decode() for word in need} for need in required_words(re.compile(pattern, flags))]


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        (
            r"before\W{1,3}(?:this|the)\W{1,3}(?:\w{1,20}\W{1,3})?(?:chat|messages?)\b",
            [{"this", "the"}, {"chat", "message", "messages"}],
        ),
        (r"ignore\W(?:\w{1,24}\W){0,4}?(?:instructions|system\W{1,3}prompt)(?!\w)", [{"instructions", "system"}]),
        (r"\bab\b|\bcd\b", [{"ab", "cd"}]),
        (r"x\Wyes\b", [{"yes"}]),
        (r"foo\W+instruction\w{0,12}", []),  # a word's beginning: not a whole word
        (r"foo\W(?:bar|baz)", []),  # nothing says the word ends there
        (r"foo\W(?:bar|b\w+)\b", []),  # one alternative proves nothing
        (r"foo\W(?:règles|rules)\b", []),  # a word beyond ASCII is no word of the word view
        (r"foo\W(?:bar)?\Wbaz\b", [{"baz"}]),  # an optional part proves nothing, what follows it does
    ],
)
def test_what_a_pattern_proves(pattern: str, expected: list[set[str]]) -> None:
    assert sorted(map(sorted, words(pattern))) == sorted(map(sorted, expected))


def test_a_case_insensitive_pattern_proves_nothing() -> None:
    assert words(r"foo\Wbar\b", re.IGNORECASE) == []
    assert words(r"(?i:foo\Wbar)\b") == []


def test_most_built_in_branches_carry_words() -> None:
    assert len(BRANCHES) >= 100


def _member(items: list[Any], chooser: random.Random) -> str:
    if items and str(items[0][0]) == "NEGATE":
        return chooser.choice(WORD_CHARS + OTHER_CHARS)  # may miss the class: such texts are left out below
    kind, value = chooser.choice(items)
    if str(kind) == "LITERAL":
        return chr(value)
    if str(kind) == "RANGE":
        return chr(chooser.randint(value[0], min(value[1], value[0] + 60)))
    name = str(value)
    if name == "CATEGORY_WORD":
        return chooser.choice(WORD_CHARS)
    if name == "CATEGORY_DIGIT":
        return chooser.choice("0123456789")
    return chooser.choice(OTHER_CHARS)


def _text_of(items: list[Any], chooser: random.Random) -> str:
    """A string that the parsed pattern may match (assertions ignored: such strings are checked)."""
    out: list[str] = []
    for op, value in items:
        name = str(op)
        if name == "LITERAL":
            out.append(chr(value))
        elif name == "NOT_LITERAL":
            out.append(chooser.choice([c for c in WORD_CHARS + OTHER_CHARS if ord(c) != value]))
        elif name == "ANY":
            out.append(chooser.choice(WORD_CHARS + OTHER_CHARS))
        elif name == "IN":
            out.append(_member(list(value), chooser))
        elif name == "BRANCH":
            out.append(_text_of(list(chooser.choice(value[1]).data), chooser))
        elif name == "SUBPATTERN":
            out.append(_text_of(list(value[3].data), chooser))
        elif name in {"MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"}:
            for _ in range(chooser.randint(value[0], min(value[1], value[0] + 3))):
                out.append(_text_of(list(value[2].data), chooser))
    return "".join(out)


def test_every_match_of_a_built_in_branch_holds_its_words() -> None:
    chooser = random.Random(35)  # noqa: S311 - test data
    matched = 0
    for pattern, needs in BRANCHES.items():
        tree = list(_parser().parse(pattern.pattern, pattern.flags).data)
        for _ in range(60):
            around = chooser.choice(["", " ", "x", "é", "_", "the "]), chooser.choice(["", " ", "s", "é", "_", " end"])
            folded = fold(around[0] + _text_of(tree, chooser) + around[1])
            if pattern.search(folded.text) is None:
                continue
            matched += 1
            missing = [sorted(need)[:4] for need in needs if need.isdisjoint(folded.words)]
            assert not missing, (pattern.pattern[:80], folded.text[:80], missing)
    assert matched > 2000


def test_no_corpus_text_matches_a_branch_whose_words_it_lacks() -> None:
    texts = [
        json.loads(line)["text"]
        for path in sorted(CORPUS.rglob("*.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    for text in texts:
        folded = fold(text)
        for pattern, needs in BRANCHES.items():
            if any(need.isdisjoint(folded.words) for need in needs):
                assert pattern.search(folded.text) is None, (pattern.pattern[:80], text[:80])
