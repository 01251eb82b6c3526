"""Text folding shared by the matching checks, with a map back to the original offsets.

Checks match against a folded copy of the text so trivial obfuscation does not pass: compatibility
decomposition (NFKD: fullwidth letters, ligatures, superscripts, circled digits become plain ones),
combining marks dropped (accents cannot split a word), format characters and other invisible ones
dropped (zero-width space and joiners, soft hyphen, BOM, variation selectors, Hangul fillers), a few
Cyrillic/Greek look-alikes, small capitals and negative circled or squared letters mapped to Latin,
and case folding. Unicode *tag* characters (U+E0020 to
U+E007E, invisible copies of ASCII used to smuggle instructions past a reader) are not dropped but
read: each folds to the ASCII character it copies, so hidden text is matched like visible text.
We decompose (NFKD) rather than compose (NFKC) so that accents can be removed; NFKC's compatibility
folding is included. Redaction replaces the *original* characters: `Folded.span` maps folded offsets
back, so a span covers the zero-width characters hidden inside a match as well.

Hangul syllables stay whole: decomposed, a syllable becomes 2 or 3 jamo, which no pattern written in
Korean would match and which nearly doubles a Korean text; no look-alike hides in them.

ASCII text (the common case) folds with one ``str.lower`` and keeps its offsets. Other text folds
with a few whole-text C-speed passes; the map back is built only when a check reports a span in a
text whose characters did not all fold one to one (most texts match nothing).
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections.abc import Iterable
from functools import cache, lru_cache
from itertools import accumulate, islice

# Look-alikes NFKD leaves alone (Cyrillic, Greek, Armenian), as escapes: folded to the Latin letter they imitate.
_CONFUSABLE_LETTERS = {
    "a": "\u0430\u0410\u03b1\u0391",
    "b": "\u0432\u0412\u03b2\u0392",
    "c": "\u0441\u0421",
    "d": "\u0501",
    "e": "\u0435\u0415\u03b5\u0395",
    "g": "\u0261",
    "h": "\u043d\u041d",
    "i": "\u0456\u03b9\u0399",
    "j": "\u0458",
    "k": "\u043a\u041a\u03ba\u039a",
    "m": "\u043c\u041c\u039c",
    "n": "\u039d\u0578\u057c",
    "o": "\u043e\u041e\u03bf\u039f",
    "p": "\u0440\u0420\u03c1\u03a1",
    "s": "\u0455",
    "t": "\u0442\u0422\u03c4\u03a4",
    "u": "\u03c5",
    "v": "\u03bd",
    "x": "\u0445\u0425\u03c7\u03a7",
    "y": "\u0443",
}
_CONFUSABLE_LETTERS["n"] += "\u03b7"  # Greek eta, drawn like an n
_CONFUSABLE_LETTERS["i"] += "\u0131"  # dotless i
# Small capitals (phonetic letters NFKD leaves alone), and the negative circled and squared letters
# of the enclosed alphanumerics: each drawn as the Latin letter it copies.
_SMALL_CAPITALS = dict(
    zip(
        "abcdefghijklmnoprstuvwyz",
        "\u1d00\u0299\u1d04\u1d05\u1d07\ua730\u0262\u029c\u026a"
        "\u1d0a\u1d0b\u029f\u1d0d\u0274\u1d0f\u1d18\u0280\ua731\u1d1b\u1d1c\u1d20\u1d21\u028f\u1d22",
        strict=True,
    )
)
for _latin in "abcdefghijklmnopqrstuvwxyz":
    _CONFUSABLE_LETTERS[_latin] = (
        _CONFUSABLE_LETTERS.get(_latin, "")
        + _SMALL_CAPITALS.get(_latin, "")
        + chr(0x1F150 + ord(_latin) - 97)  # negative circled
        + chr(0x1F170 + ord(_latin) - 97)  # negative squared
    )
_CONFUSABLES = str.maketrans({char: latin for latin, chars in _CONFUSABLE_LETTERS.items() for char in chars})
_HAS_CONFUSABLE = re.compile("[" + "".join(_CONFUSABLE_LETTERS.values()) + "]")
# Runs of '?' in the text encoded with errors="replace": every non-ASCII character (and literal '?',
# which folds to itself). A literal-prefixed bytes pattern is found by a C-speed scan; `[^\x00-\x7f]+`
# on the str costs ~10 ns at every position.
_MAYBE_NON_ASCII = re.compile(rb"\?[?]*")
_HANGUL_SYLLABLE = re.compile("[\uac00-\ud7a3]")
_NEITHER_ASCII_NOR_HANGUL = re.compile("[^\x00-\x7f\uac00-\ud7a3]+")
# Invisible characters that are neither combining marks nor format characters: variation selectors
# (Mn with combining class 0), the combining grapheme joiner, Hangul fillers, Khmer inherent vowels.
_INVISIBLE = (
    "\u034f\u115f\u1160\u17b4\u17b5\u3164\uffa0"
    + "".join(map(chr, range(0xFE00, 0xFE10)))
    + "".join(map(chr, range(0xE0100, 0xE01F0)))
)
TAG_FIRST, TAG_LAST = 0xE0020, 0xE007E  # tag characters that copy printable ASCII
_TAGS_TO_ASCII = {point: chr(point - 0xE0000) for point in range(TAG_FIRST, TAG_LAST + 1)}
_MANY_RUNS = 48  # past this many, per-run overhead costs more than the passes over the whole text
_CACHED_RUN = 32  # longer runs are folded without caching

# One byte per folded character, non-ASCII as '?', so byte offsets are folded offsets.
_WORD_BYTES = bytes(i if chr(i).isalnum() or i == 95 else 32 for i in range(128)) + b" " * 128


class Folded:
    """The folded text, its map back to the source, and views shared by the checks of one text."""

    __slots__ = ("_ascii", "_ends", "_words", "even", "source", "text")

    def __init__(self, text: str, source: str, even: bool) -> None:
        self.text = text  # what checks match
        self.source = source  # the original
        self.even = even  # every character folded to exactly one: offsets are the same in both
        self._ends: list[int] | None = None  # where each original character's folding ends in `text`
        self._ascii: bytes | None = None
        self._words: frozenset[bytes] | None = None

    def span(self, start: int, end: int) -> tuple[int, int]:
        """Original [start, end) of the folded [start, end): the characters whose foldings hold them,
        with any folded to nothing that follow them (a zero-width space inside a match is covered)."""
        if self.even:
            return start, end
        if self._ends is None:
            self._ends = list(accumulate(map(_FOLDED_LENGTH.__getitem__, self.source)))
        return bisect_right(self._ends, start), bisect_right(self._ends, end)

    def at(self, original: int) -> int:
        """The folded offset at which the original character at `original` begins (`span`'s inverse)."""
        if self.even or original <= 0:
            return max(original, 0)
        if self._ends is None:
            self._ends = list(accumulate(map(_FOLDED_LENGTH.__getitem__, self.source)))
        return self._ends[min(original, len(self._ends)) - 1]

    @property
    def ascii(self) -> bytes:
        """Byte view for C-speed scans (`bytes.translate`, `bytes.find`): offsets equal folded offsets."""
        if self._ascii is None:
            self._ascii = self.text.encode("ascii", "replace")
        return self._ascii

    @property
    def words(self) -> frozenset[bytes]:
        """The distinct ASCII words (letters, digits, underscore): keyword gates for pattern lists."""
        if self._words is None:
            self._words = frozenset(self.ascii.translate(_WORD_BYTES).split())
        return self._words


def fold(text: str) -> Folded:
    """Text with a few non-ASCII runs (accented Latin) folds run by run, short runs from a cache;
    text with many (another script) folds whole. Both give what folding each character on its own
    (`fold_char`) gives: the marks NFKD could reorder are exactly the ones dropped, casefold is
    context-free, and ASCII characters only lower-case."""
    if text.isascii():
        return Folded(text.lower(), text, even=True)
    runs = [run.span() for run in islice(_MAYBE_NON_ASCII.finditer(text.encode("ascii", "replace")), _MANY_RUNS + 1)]
    if len(runs) > _MANY_RUNS:
        folded, even = _fold_whole(text)
        return Folded(folded, text, even)
    folded, even = _fold_runs(text, runs)
    return Folded(folded, text, even)


def _fold_runs(text: str, runs: Iterable[tuple[int, int]]) -> tuple[str, bool]:
    """The text between `runs` lower-cased (ASCII, or Hangul syllables, which it leaves alone), the
    runs folded; and whether every character became one."""
    parts: list[str] = []
    even = True
    done = 0
    for start, end in runs:
        parts.append(text[done:start].lower())
        chars = text[start:end]
        folded, run_even = _fold_cached(chars) if end - start <= _CACHED_RUN else _fold_whole(chars)
        parts.append(folded)
        even = even and run_even
        done = end
    parts.append(text[done:].lower())
    return "".join(parts), even


@lru_cache(maxsize=8192)
def _fold_cached(run: str) -> tuple[str, bool]:
    return _fold_whole(run)


def _fold_whole(text: str) -> tuple[str, bool]:
    if _HANGUL_SYLLABLE.search(text):  # NFKD would split them: fold only what lies between them
        return _fold_runs(text, (run.span() for run in _NEITHER_ASCII_NOR_HANGUL.finditer(text)))
    return _fold_passes(text)


def _fold_passes(text: str) -> tuple[str, bool]:
    """The folding in C-speed passes over a whole text without Hangul syllables, and whether every
    character became one.

    Each pass only grows (NFKD, casefold) or only shrinks (dropping) every character, so equal
    lengths after each pass mean one to one."""
    decomposed = unicodedata.normalize("NFKD", text)
    dropped_bmp, dropped_astral = _dropped()
    kept = dropped_bmp.sub("", decomposed)
    if len(kept.encode("utf-16-le", "surrogatepass")) > 2 * len(kept):  # characters beyond the BMP
        kept = dropped_astral.sub("", kept.translate(_TAGS_TO_ASCII))
    if _HAS_CONFUSABLE.search(kept):
        kept = kept.translate(_CONFUSABLES)
    folded = kept.casefold()
    return folded, len(text) == len(decomposed) == len(kept) == len(folded)


@lru_cache(maxsize=8192)
def fold_char(char: str) -> str:
    """One character folded: the reference `fold` is equal to, character by character."""
    if "\uac00" <= char <= "\ud7a3":
        return char  # a Hangul syllable stays whole
    if TAG_FIRST <= ord(char) <= TAG_LAST:
        return chr(ord(char) - 0xE0000).lower()  # a tag character reads as the ASCII it copies
    if unicodedata.category(char) == "Cf" or char in _INVISIBLE:
        return ""
    decomposed = unicodedata.normalize("NFKD", char)
    kept = "".join(c for c in decomposed if not unicodedata.combining(c))
    return kept.translate(_CONFUSABLES).casefold()


class _FoldedLengths(dict[str, int]):
    """How many characters each character folds to, learnt as characters are met."""

    def __missing__(self, char: str) -> int:
        length = self[char] = len(fold_char(char))
        return length


_FOLDED_LENGTH = _FoldedLengths({chr(i): 1 for i in range(128)})


@cache
def _dropped() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """Combining marks (canonical combining class > 0), format characters (category Cf) other than
    the tag characters that copy ASCII (read, not dropped) and the other invisible characters, as
    two classes: the Basic Multilingual Plane's, which `re` checks with one table lookup per
    character, and the rest, only searched when a text has characters beyond it.

    Built on first use (~20 ms) from this Python's Unicode database: the planes that hold any (the
    first three and the special-purpose plane 14)."""
    ranges: list[list[int]] = []
    for point in (*range(0x80, 0x30000), *range(0xE0000, 0xE1000)):
        char = chr(point)
        if TAG_FIRST <= point <= TAG_LAST:
            continue
        if unicodedata.combining(char) or unicodedata.category(char) == "Cf" or char in _INVISIBLE:
            if ranges and ranges[-1][1] == point - 1:
                ranges[-1][1] = point
            else:
                ranges.append([point, point])

    def char_class(selected: list[list[int]]) -> re.Pattern[str]:
        return re.compile("[" + "".join(f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in selected) + "]")

    return char_class([r for r in ranges if r[1] <= 0xFFFF]), char_class([r for r in ranges if r[1] > 0xFFFF])


_PATTERN_LITERAL = re.compile(r"\\.|[^\x00-\x7f]", re.DOTALL)


def fold_pattern(pattern: str) -> str:
    """A regular expression for folded text: its non-ASCII characters, which can only be literals
    (escaped or not, in a class or not), folded like the text, so that ``café`` finds ``CAFÉ`` and a
    fullwidth asterisk stays a literal star. ASCII, where the syntax lives, is left alone."""

    def literal(match: re.Match[str]) -> str:
        token = match.group()
        if token.isascii():
            return token  # an escape of the pattern's own syntax
        return re.escape(fold_char(token[-1]))

    return pattern if pattern.isascii() else _PATTERN_LITERAL.sub(literal, pattern)
