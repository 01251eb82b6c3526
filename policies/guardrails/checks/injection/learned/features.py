"""What the learned tier reads of a text: the same features at training and at inference.

A text's features are those of its distinct folded words (`Folded.words`: ASCII letters, digits
and underscores of the folded text; characters of other scripts are not read), each word giving:
- the word itself (``=word``);
- the character 4-grams of ``<word>`` (``<`` and ``>`` mark its ends), so that a new inflection or
  a misspelling shares most features with the word it comes from (3- and 5-grams as well scored no
  better on the held-out texts and cost three times as much);
- a word longer than `MAX_WORD` (a base64 or hex blob, a hash) gives one shape feature instead,
  ``#hex`` or ``#long``: its characters are noise.
Each feature is hashed with CRC-32 (stable across processes and platforms, unlike Python's salted
`hash`) into one of ``2**bits`` buckets; a bucket's value is how many distinct words put a feature
in it, divided by the square root of the number of distinct words, so that a long text does not
score higher for its length alone. The vector is a sum over distinct words: the model's score of a
text is a sum of per-word scores, which inference caches per word (`model`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from zlib import crc32

CHAR_NGRAM = 4
MAX_WORD = 24  # longer words are blobs (base64, hex, hashes), read by their shape only
_HEX_DIGITS = frozenset(b"0123456789abcdef")
# The 4-grams of a marked word of each length, as slices: taken by `map`, without a Python loop.
_SLICES = [[slice(at, at + CHAR_NGRAM) for at in range(length - CHAR_NGRAM + 1)] for length in range(MAX_WORD + 3)]


def word_features(word: bytes) -> list[bytes]:
    """The features one distinct word contributes."""
    if len(word) > MAX_WORD:
        return [b"#hex" if _HEX_DIGITS.issuperset(word) else b"#long"]
    marked = b"<" + word + b">"
    return [b"=" + word, *map(marked.__getitem__, _SLICES[len(marked)])]


def word_buckets(word: bytes, bits: int) -> Iterable[int]:
    return map(((1 << bits) - 1).__and__, map(crc32, word_features(word)))


def vector(words: Iterable[bytes], bits: int) -> dict[int, float]:
    """The sparse feature vector of a text's distinct words (training; inference sums per word)."""
    counts: dict[int, int] = {}
    distinct = set(words)
    for word in distinct:
        for index in word_buckets(word, bits):
            counts[index] = counts.get(index, 0) + 1
    scale = 1.0 / math.sqrt(len(distinct)) if distinct else 0.0
    return {index: count * scale for index, count in counts.items()}
