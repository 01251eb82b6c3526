"""Letter carriers: text whose letters were swapped, spelt out or drawn in other characters, decoded as
candidates (`Decoding`) for `decoded` to judge.

- ``rot13`` and ``cipher`` (every other Caesar shift, and Atbash): recognised by known words in their
  encoded form; one index maps each encoded form to the shifts that make it, so a text costs one set
  intersection whatever the shift;
- ``nato``: runs of the phonetic alphabet (``India Golf November``), one letter a word;
- ``braille``: Unicode braille cells, read as grade 1 letters;
- ``piglatin``: most words ending in ``ay``, their moved consonants put back;
- ``disguised``: letters drawn from other scripts inside Latin words (a Cyrillic ``o`` in "ignore"),
  or runs of styled letters (mathematical bold, script, fraktur, circled, squared, small
  capitals): folding already reads them; the carrier tells the check that someone disguised them.
"""

from __future__ import annotations

import re
from collections import Counter
from itertools import islice

from policies.guardrails.checks.injection.obfuscation.codes import MAX_CHARS, Decoding
from policies.guardrails.normalize import Folded

ATBASH = 26  # the index's id for Atbash; 1 to 25 are Caesar shifts
_LOWER = "abcdefghijklmnopqrstuvwxyz"


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_DECODE = {
    **{by: str.maketrans(_LOWER, _LOWER[-by:] + _LOWER[:-by]) for by in range(1, 26)},  # undo a shift by `by`
    ATBASH: str.maketrans(_LOWER, _LOWER[::-1]),
}
_ENCODE = {
    **{by: str.maketrans(_LOWER, _LOWER[by:] + _LOWER[:by]) for by in range(1, 26)},
    ATBASH: str.maketrans(_LOWER, _LOWER[::-1]),
}
# Words a shifted request is likely to hold besides the checks' vocabulary: requests and function
# words of the languages the checks read, so that a shifted French or German payload is recognised.
REQUEST_WORDS = _words(
    "explain write tell give make build describe list show provide create generate teach find steps step detailed "
    "how what where when which why who someone without into get code script email fake home way easiest best "
    "can could would should must help need want know use using send steal hack password money people about after "
    "before every first just like more most much only other over some such than them then these they through "
    "very were when while"
)
FUNCTION_WORDS = _words(
    "the and you your this that with from have are not for now was can all any will what how there their "
    # French, German, Spanish, Italian, Portuguese, Dutch, Polish: function words and common verbs
    "les des une est pas pour dans que qui avec sur tout toutes tous mon ton son ses comment moi toi vous nous "
    "faire peut peux suis sont mais plus comme aussi fait "
    "der die das und ist nicht ein eine einen wie mir mich ich alle mit fur auf den dem kann sich sie wir uns "
    "auch noch oder aber wenn machen bitte "
    "los las una por para con como del sin mis tus esta este eso pero mas todo hacer puedo quiero sobre cual "
    "donde tambien "
    "che non per sono della delle dei gli questo questa anche ancora fare posso voglio dove tutto tutti scrivi "
    "dimmi "
    "nao uma com dos das sem voce quero qual onde isso esse essa "
    "het een niet van voor met hoe wat mijn zijn maar ook naar deze dat kan wil "
    "jak nie czy jest sie dla ale tak ten"
)
_NATO = {
    "alfa": "a", "alpha": "a", "bravo": "b", "charlie": "c", "delta": "d", "echo": "e", "foxtrot": "f",
    "golf": "g", "hotel": "h", "india": "i", "juliett": "j", "juliet": "j", "kilo": "k", "lima": "l", "mike": "m",
    "november": "n", "oscar": "o", "papa": "p", "quebec": "q", "romeo": "r", "sierra": "s", "tango": "t",
    "uniform": "u", "victor": "v", "whiskey": "w", "whisky": "w", "xray": "x", "x-ray": "x", "yankee": "y",
    "zulu": "z",
}  # fmt: skip
NATO_WORDS = frozenset(w.encode() for w in _NATO if w.isalpha()) | {b"ray"}
MIN_NATO = 5  # spelling-alphabet words a run needs
MIN_SHIFTED = 2  # known words in one shift (and a tenth of the text's) before a text is read as shifted
_NATO_NAME = "|".join(sorted(_NATO, key=len, reverse=True))
_NATO_RUN = re.compile(rf"(?:\b(?:{_NATO_NAME})\b(?:[\s,;/|()]|space|stop)*){{6,}}")
_NATO_GAP = re.compile(r"\s*(?:/|\||\(space\)|\bspace\b|\bstop\b)\s*|\s{2,}")
# Braille grade 1 letters by their cell (dots 1-6 as bits 0-5 of U+2800).
_BRAILLE = {
    0x01: "a", 0x03: "b", 0x09: "c", 0x19: "d", 0x11: "e", 0x0B: "f", 0x1B: "g", 0x13: "h", 0x0A: "i", 0x1A: "j",
    0x05: "k", 0x07: "l", 0x0D: "m", 0x1D: "n", 0x15: "o", 0x0F: "p", 0x1F: "q", 0x17: "r", 0x0E: "s", 0x1E: "t",
    0x25: "u", 0x27: "v", 0x3A: "w", 0x2D: "x", 0x3D: "y", 0x35: "z", 0x02: ",", 0x06: ";", 0x12: ":", 0x32: ".",
    0x16: "!", 0x26: "?", 0x04: "'", 0x24: "-", 0x00: " ",
}  # fmt: skip
_BRAILLE_SIGNS = frozenset({0x20, 0x3C})  # capital and number signs: read as nothing
_BRAILLE_RUN = re.compile("[\u2800-\u28ff][\u2800-\u28ff \t]{5,}")
_PIG = re.compile(r"\b([a-z]{1,20}?)(w?ay)\b")
_VOWELS = frozenset("aeiou")
_STYLED = re.compile(
    "[\U0001d400-\U0001d7ff\U0001f130-\U0001f189\u24b6-\u24e9\uff21-\uff3a\uff41-\uff5a\u1d00-\u1d22"
    "\ua730\ua731\u0262\u029c\u026a\u0274\u0280\u028f\u029f\u01eb]"
)
_MIXED = re.compile("[a-zA-Z][\u0370-\u03ff\u0400-\u04ff]|[\u0370-\u03ff\u0400-\u04ff][a-zA-Z]")
# UTF-8 lead bytes of the blocks above (a C-speed count before any pattern): mathematical letters,
# enclosed letters, circled letters, fullwidth small letters, small capitals; Greek and Cyrillic.
_STYLED_LEADS = (b"\xf0", b"\xe2\x92", b"\xe2\x93", b"\xef\xbd", b"\xe1\xb4")  # astral, circled, fullwidth, small
_NOT_STYLED_FIRST = bytes(i for i in range(256) if i not in (0xF0, 0xE2, 0xEF, 0xE1))  # deleted: what is left counts
_LETTER_OR_OTHER = bytes(97 if chr(i).isalpha() else 63 if i == 63 else 32 for i in range(128)) + b" " * 128
_NOT_GREEK_CYRILLIC = bytes(i for i in range(256) if i not in (0xCE, 0xCF, 0xD0, 0xD1))
MIN_STYLED = 8  # styled letters: fewer are a decoration (a bold word in a bio)
MIN_MIXED = 2  # words mixing Latin with Cyrillic or Greek letters


class ShiftIndex:
    """Known words in every Caesar shift and in Atbash: encoded form -> the shifts that make it."""

    def __init__(self, known: frozenset[str]) -> None:
        plain = {w for w in known if w.isascii() and w.isalpha() and len(w) > 2}
        index: dict[bytes, set[int]] = {}
        for by, table in _ENCODE.items():
            for word in plain:
                encoded = word.translate(table)
                if encoded not in plain:
                    index.setdefault(encoded.encode(), set()).add(by)
        self._index = {word: frozenset(shifts) for word, shifts in index.items()}
        self.keys = frozenset(self._index)  # every known word in its encoded forms

    def find(self, folded: Folded) -> list[Decoding]:
        """The whole text decoded by the shift that at least two (three but for ROT13) of its words,
        and a tenth of its distinct words, were encoded with."""
        words = folded.words
        hits = words & self.keys
        if len(hits) < MIN_SHIFTED:
            return []
        tally = Counter(by for word in hits for by in self._index[word])
        by, count = tally.most_common(1)[0]
        if count < max(2 if by == 13 else 3, len(words) // 10):
            return []
        kind = "rot13" if by == 13 else "cipher"
        return [Decoding(kind, folded.text[:MAX_CHARS].translate(_DECODE[by]), 0, len(folded.source), whole=True)]


def nato(folded: Folded) -> list[Decoding]:
    present = folded.words & NATO_WORDS
    if len(present) < MIN_NATO:
        return []
    text = folded.text
    places = sorted(at for word in present for at in _places(text, word.decode()))
    found: list[Decoding] = []
    done = 0
    for at in places:
        match = _NATO_RUN.match(text, at) if at >= done else None
        if match is None:
            continue
        done = match.end()
        words = [re.findall(r"x-ray|[a-z]+", group) for group in _NATO_GAP.split(match.group().strip())]
        decoded = " ".join("".join(_NATO[w] for w in group if w in _NATO) for group in words)
        found.append(Decoding("nato", decoded, *folded.span(*match.span())))
    return found


def _places(text: str, word: str) -> list[int]:
    found: list[int] = []
    at = text.find(word)
    while at != -1 and len(found) < 64:
        found.append(at)
        at = text.find(word, at + len(word))
    return found


def braille(folded: Folded) -> list[Decoding]:
    source = folded.source
    if source.isascii():
        return []
    found: list[Decoding] = []
    for match in _BRAILLE_RUN.finditer(source):
        cells = [ord(c) - 0x2800 if c not in " \t" else 0 for c in match.group()]
        letters = [_BRAILLE.get(cell, "?") for cell in cells if cell not in _BRAILLE_SIGNS]
        if letters.count("?") <= len(letters) // 10:
            found.append(Decoding("braille", "".join(letters), *match.span()))
    return found


class PigLatin:
    """Pig Latin: a quarter of the words, and five at least, end in ``ay``; each is turned back (its moved
    consonants, one to three, put in front: whichever makes a known word, else one)."""

    def __init__(self, known: frozenset[str]) -> None:
        self._known = known

    def find(self, folded: Folded) -> list[Decoding]:
        text, words = folded.text, folded.words
        if folded.ascii.count(b"ay ") < max(4, len(words) // 5):
            return []  # most words end in "ay"
        pig = [w for w in words if w.endswith(b"ay") and len(w) > 3]
        if len(pig) < 5 or len(pig) < len(words) // 4:
            return []
        decoded = _PIG.sub(lambda match: self._back(match.group(1), match.group(2)), text[:MAX_CHARS])
        return [Decoding("piglatin", decoded, 0, len(folded.source), whole=True)]

    def _back(self, stem: str, tail: str) -> str:
        if tail == "way" and stem[:1] in _VOWELS:
            return stem  # a word that began with a vowel
        stem = stem + "w" if tail == "way" else stem
        tries = [stem[-k:] + stem[:-k] for k in (1, 2, 3) if len(stem) > k and not _VOWELS & set(stem[-k:])]
        return next((word for word in tries if word in self._known), tries[0] if tries else stem)


def _mixed(source: str) -> list[tuple[int, int]]:
    """Where a Greek or Cyrillic letter touches a Latin one: looked for only where a character that is
    not ASCII touches an ASCII letter (a C-speed count and `find`s on a byte view)."""
    marks = source.encode("ascii", "replace").translate(_LETTER_OR_OTHER)
    if marks.count(b"a?") + marks.count(b"?a") < MIN_MIXED:
        return []
    found: list[tuple[int, int]] = []
    for needle in (b"a?", b"?a"):
        at = marks.find(needle)
        while at != -1 and len(found) < 64:
            if _MIXED.match(source, at) is not None:
                found.append((at, at + 2))
            at = marks.find(needle, at + 1)
    return sorted(found)


def disguised(folded: Folded) -> list[Decoding]:
    """Styled letters (at least `MIN_STYLED`) or words that mix scripts (at least `MIN_MIXED`), as one
    carrier from the first to the last word that holds one: folding has already read them as plain
    letters (the decoding is that folded text)."""
    source = folded.source
    if source.isascii():
        return []
    raw = source.encode("utf-8", "surrogatepass")
    spans = []
    if len(raw.translate(None, _NOT_STYLED_FIRST)) >= MIN_STYLED and sum(map(raw.count, _STYLED_LEADS)) >= MIN_STYLED:
        spans = [m.span() for m in islice(_STYLED.finditer(source), 4096)]
    if len(spans) < MIN_STYLED:
        spans = _mixed(source) if len(raw.translate(None, _NOT_GREEK_CYRILLIC)) >= MIN_MIXED else []
        if len(spans) < MIN_MIXED:
            return []
    start = source.rfind(" ", 0, spans[0][0]) + 1
    space = source.find(" ", spans[-1][1])
    end = len(source) if space == -1 else space
    return [Decoding("disguised", folded.text[folded.at(start) : folded.at(end)][:MAX_CHARS], start, end)]
