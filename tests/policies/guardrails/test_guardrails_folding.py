"""Folding: whole runs of non-ASCII text fold exactly as their characters do one by one, and every
span found in folded text maps back to the original characters a redaction must replace."""

from __future__ import annotations

import random

import pytest

from policies.guardrails.normalize import fold, fold_char
from tests.support.guardrail_helpers import check_input, fullwidth

# Latin with accents (precomposed and combining), fullwidth, ligatures, zero-width and format
# characters, Cyrillic/Greek look-alikes, Hangul (decomposes to several jamo), CJK, emoji.
ALPHABET = (
    "abcXYZ 09@.?-"
    "éÉñüßçø\u0301\u0308" + fullwidth("fullWIDTH@12") + "ﬁﬂ²①"
    "\u200b\u200d\u00ad\ufeff\u2060"
    "\u0430\u0435\u043e\u0440\u0441\u0445\u0456\u0391\u0392\u0395"
    "가각힣"
    "中文字"
    "😀"
)


def _one_by_one(text: str) -> str:
    """The reference folding: each character through NFKD, marks dropped, look-alikes, casefold."""
    return "".join(char.lower() if char.isascii() else fold_char(char) for char in text)


@pytest.mark.parametrize("seed", range(5))
def test_text_folds_like_its_characters_one_by_one(seed: int) -> None:
    # Up to 400 characters: texts with a few runs of non-ASCII (folded run by run) and with many
    # (folded whole) both occur.
    rng = random.Random(seed)  # noqa: S311 - reproducible text, not secrets
    for _ in range(400):
        text = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 400)))
        assert fold(text).text == _one_by_one(text), ascii(text)


@pytest.mark.parametrize(
    "text",
    [
        "Grüße, café" * 3,  # a few short runs
        "Grüße, café " * 60,  # many runs
        fullwidth("ABC") + "中文字가" * 40 + "é\u0301",  # one long run
    ],
)
def test_each_way_of_folding_agrees(text: str) -> None:
    assert fold(text).text == _one_by_one(text)


KOREAN = "아래 분기 보고서를 이사회를 위해 다섯 가지 요점으로 요약해 주세요. " * 8


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"제 메일은 {fullwidth('jane@example.com')} 입니다", "제 메일은 [EMAIL] 입니다"),
        ("ﬁle to jo\u200be@exa\u0301mple.com, 가격 ①②", "ﬁle to [EMAIL], 가격 ①②"),
        ("Grüße an anna@straße.de?", "Grüße an [EMAIL]?"),
        (f"{KOREAN}메일: jane@exa\u200bmple.com {KOREAN}", f"{KOREAN}메일: [EMAIL] {KOREAN}"),  # folded whole
        ("请联系 jane.doe@example.com。" * 30, "请联系 [EMAIL]。" * 30),  # one to one, folded whole
    ],
)
async def test_redaction_replaces_exactly_the_original_characters(text: str, expected: str) -> None:
    outcome = await check_input({"check": "pii", "entities": ["email"], "action": "redact"}, text)
    assert outcome.prompt == expected


def test_hangul_syllables_stay_whole() -> None:
    folded = fold("한국어 TEXT")
    assert (folded.text, folded.even) == ("한국어 text", True)


@pytest.mark.parametrize(
    ("pattern", "text"),
    [
        ("비밀번호", "내 비밀번호는 1234"),  # Korean, as written
        ("café", "the CAFÉ is open"),  # accents in the pattern fold like the text's
        ("[éè]t[ée]", "ÉTÉ"),  # in a class too
        ("が", "がっこう"),  # a kana with its voicing mark
        ("\uff0a", "a * star"),  # a fullwidth asterisk is a literal star, not a quantifier
        ("\\\\é", "a \\e"),  # an escaped backslash, then a letter
    ],
)
async def test_a_pattern_with_non_ascii_letters_finds_them_in_any_form(pattern: str, text: str) -> None:
    outcome = await check_input({"check": "regex", "pattern": pattern, "action": "deny"}, text)
    assert outcome.verdicts[0].verdict == "deny"
