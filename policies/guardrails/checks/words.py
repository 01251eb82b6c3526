"""`words`: a list of words and phrases, matched as whole words on the folded text.

The text is split into word tokens once and each token is looked up in a set, so a list of
thousands of words costs the same as a list of three. A phrase matches its words in order,
separated by anything that is not a word character (``ignore-previous`` and ``ignore  previous``
both match ``ignore previous``). Verdicts name entries by position (``entry 3``), not by the word.
With ``leet`` (default), digits and symbols standing for letters
are read as those letters (``h4ck3r``, ``$ecret``), and ``1``, ``l`` and ``i`` are one letter, on
both the list and the text; matching is on whole words, so ``ass`` does not match ``class``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from pydantic import Field, field_validator

from policies.guardrails.base import CheckConfig, Finding, Span, any_hit, trailing_token
from policies.guardrails.normalize import Folded, fold

_TOKENS = re.compile(r"[\w@$]+")
_LEET = str.maketrans({"0": "o", "1": "i", "l": "i", "3": "e", "4": "a", "@": "a", "5": "s", "$": "s", "7": "t"})
_GAP = 8  # characters allowed between the words of a phrase in stream hold-back


class WordsConfig(CheckConfig):
    check: Literal["words"]
    # Words or phrases that are hits (whole words, case-insensitive).
    words: list[str] = Field(min_length=1)
    # Also match look-alike spellings (digits and symbols for letters).
    leet: bool = True
    # What a redacted word becomes.
    placeholder: str = "[REDACTED]"

    @field_validator("words")
    @classmethod
    def _has_word(cls, value: list[str]) -> list[str]:
        empty = [w for w in value if not _TOKENS.search(fold(w).text)]
        if empty:
            raise ValueError(f"entries with no word characters: {empty!r}")
        return value

    def build(self) -> WordsCheck:
        return WordsCheck(self)


class WordsCheck:
    def __init__(self, config: WordsConfig) -> None:
        self.config = config
        self._phrases: dict[str, list[tuple[tuple[str, ...], str]]] = {}
        longest = 0
        for number, entry in enumerate(config.words, 1):
            tokens = tuple(self._canon(t) for t in _TOKENS.findall(fold(entry).text))
            self._phrases.setdefault(tokens[0], []).append((tokens[1:], f"entry {number}"))
            if len(tokens) > 1:  # single words are held by the trailing-token rule alone
                longest = max(longest, len(entry) + _GAP * (len(tokens) - 1))
        self._window = longest + 1

    def _canon(self, token: str) -> str:
        return token.translate(_LEET) if self.config.leet else token

    def spans(self, folded: Folded) -> list[Span]:
        tokens = [(m.start(), m.end(), self._canon(m.group())) for m in _TOKENS.finditer(folded.text)]
        found: list[Span] = []
        phrases = self._phrases
        for index, (start, _end, token) in enumerate(tokens):
            candidates = phrases.get(token)
            if candidates is None:
                continue
            for rest, entry in candidates:
                tail = tokens[index + 1 : index + 1 + len(rest)]
                if tuple(t[2] for t in tail) == rest:
                    end = tail[-1][1] if tail else tokens[index][1]
                    found.append(Span(*folded.span(start, end), label=entry))
        return found

    def judge(self, spans: Sequence[Span]) -> Finding:
        return any_hit(spans, "listed words")

    def hold(self, folded: str) -> int:
        return max(self._window, trailing_token(folded, 4096))

    def placeholder(self, span: Span) -> str:
        return self.config.placeholder
