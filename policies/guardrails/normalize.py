"""Text folding shared by the matching checks, with a map back to the original offsets.

Checks match against a folded copy of the text so trivial obfuscation does not pass: compatibility
decomposition (NFKD: fullwidth letters, ligatures, superscripts, circled digits become plain ones),
combining marks dropped (accents cannot split a word), format characters dropped (zero-width space
and joiners, soft hyphen, BOM), a few Cyrillic/Greek look-alikes mapped to Latin, and case folding.
We decompose (NFKD) rather than compose (NFKC) so that accents can be removed; NFKC's compatibility
folding is included. Redaction replaces the *original* characters: `Folded.span` maps folded offsets
back, so a span covers the zero-width characters hidden inside a match as well.

ASCII text (the common case) folds with one ``str.lower`` and keeps its offsets (no map is built).
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

# Look-alikes NFKD leaves alone (Cyrillic, Greek, Armenian), as escapes: folded to the Latin letter they imitate.
_CONFUSABLES = str.maketrans(
    {
        **dict.fromkeys("\u0430\u0410\u03b1\u0391", "a"),
        **dict.fromkeys("\u0432\u0412\u03b2\u0392", "b"),
        **dict.fromkeys("\u0441\u0421", "c"),
        **dict.fromkeys("\u0501", "d"),
        **dict.fromkeys("\u0435\u0415\u03b5\u0395", "e"),
        **dict.fromkeys("\u0261", "g"),
        **dict.fromkeys("\u043d\u041d", "h"),
        **dict.fromkeys("\u0456\u03b9\u0399", "i"),
        **dict.fromkeys("\u0458", "j"),
        **dict.fromkeys("\u043a\u041a\u03ba\u039a", "k"),
        **dict.fromkeys("\u043c\u041c\u039c", "m"),
        **dict.fromkeys("\u039d\u0578\u057c", "n"),
        **dict.fromkeys("\u043e\u041e\u03bf\u039f", "o"),
        **dict.fromkeys("\u0440\u0420\u03c1\u03a1", "p"),
        **dict.fromkeys("\u0455", "s"),
        **dict.fromkeys("\u0442\u0422\u03c4\u03a4", "t"),
        **dict.fromkeys("\u03c5", "u"),
        **dict.fromkeys("\u03bd", "v"),
        **dict.fromkeys("\u0445\u0425\u03c7\u03a7", "x"),
        **dict.fromkeys("\u0443", "y"),
    }
)
_RUNS = re.compile(r"[\x00-\x7f]+|[^\x00-\x7f]")


# One byte per folded character, non-ASCII as '?', so byte offsets are folded offsets.
_WORD_BYTES = bytes(i if chr(i).isalnum() or i == 95 else 32 for i in range(128)) + b" " * 128


class Folded:
    """The folded text, its map back to the source, and views shared by the checks of one text."""

    __slots__ = ("_ascii", "_words", "offsets", "source", "text")

    def __init__(self, text: str, source: str, offsets: list[int] | None) -> None:
        self.text = text  # what checks match
        self.source = source  # the original
        self.offsets = offsets  # original index of each folded char, plus len(source); None: identity
        self._ascii: bytes | None = None
        self._words: frozenset[bytes] | None = None

    def span(self, start: int, end: int) -> tuple[int, int]:
        """Original [start, end) of the folded [start, end)."""
        if self.offsets is None:
            return start, end
        return self.offsets[start], self.offsets[end]

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


@lru_cache(maxsize=8192)
def _fold_char(char: str) -> str:
    if unicodedata.category(char) == "Cf":
        return ""
    decomposed = unicodedata.normalize("NFKD", char)
    kept = "".join(c for c in decomposed if not unicodedata.combining(c))
    return kept.translate(_CONFUSABLES).casefold()


def fold(text: str) -> Folded:
    if text.isascii():
        return Folded(text.lower(), text, None)
    parts: list[str] = []
    offsets: list[int] = []
    for run in _RUNS.finditer(text):
        start = run.start()
        chunk = run.group()
        if chunk.isascii():
            parts.append(chunk.lower())
            offsets.extend(range(start, run.end()))
            continue
        folded = _fold_char(chunk)
        parts.append(folded)
        offsets.extend([start] * len(folded))
    offsets.append(len(text))
    return Folded("".join(parts), text, offsets)
