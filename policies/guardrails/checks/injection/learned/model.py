"""The learned tier at inference: the shipped weights, read with the standard library only.

`weights.bin` is ``2**bits`` little-endian int16 weights, zlib-compressed; a weight is its integer
times ``scale`` (`model.json`, with the bias, the feature settings, the tuned thresholds and what
the model was trained on). A text's probability is ``sigmoid(bias + scale * sum / sqrt(n))``,
``sum`` over its ``n`` distinct folded words of each word's integer score (the weights of its
features' buckets, `features`). Word scores are cached: a text of words seen before costs one
dictionary lookup per distinct word, so scoring a 2 KB prompt takes microseconds; a word never seen
costs a few (its n-grams hashed once).
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
import zlib
from array import array
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from policies.guardrails.checks.injection.learned.features import CHAR_NGRAM, MAX_WORD, word_buckets

FORMAT = 1
WEIGHTS_FILE = "weights.bin"
META_FILE = "model.json"
_CACHED_WORDS = 1 << 16  # the word-score cache is emptied past this many words (bounded memory)


@dataclass(frozen=True, slots=True)
class Thresholds:
    alone: float  # the model's probability at which it denies a text by itself
    with_signal: float  # ... and at which it denies one where a weak heuristic signal fired


class _WordScores(dict[bytes, int]):
    """Each word's integer score, computed on first sight."""

    def __init__(self, weights: array[int], bits: int) -> None:
        super().__init__()
        self._weights = weights
        self._bits = bits

    def __missing__(self, word: bytes) -> int:
        if len(self) >= _CACHED_WORDS:
            self.clear()
        score = self[word] = sum(map(self._weights.__getitem__, word_buckets(word, self._bits)))
        return score


class LearnedModel:
    def __init__(self, weights: array[int], scale: float, bias: float, bits: int, thresholds: Thresholds) -> None:
        if len(weights) != 1 << bits:
            raise ValueError(f"the learned model has {len(weights)} weights, not 2**{bits}")
        self.scale = scale
        self.bias = bias
        self.bits = bits
        self.thresholds = thresholds
        self._scores = _WordScores(weights, bits)

    def probability(self, words: frozenset[bytes]) -> float:
        """The probability that a text whose distinct folded words are `words` is an attack; 0 for a
        text with no word the model can read (other scripts only: it abstains)."""
        if not words:
            return 0.0
        total = sum(map(self._scores.__getitem__, words))
        return sigmoid(self.bias + self.scale * total / math.sqrt(len(words)))


def sigmoid(logit: float) -> float:
    if logit >= 0:
        return 1.0 / (1.0 + math.exp(-logit))
    odds = math.exp(logit)
    return odds / (1.0 + odds)


def read(packed: bytes, meta: dict[str, Any]) -> LearnedModel:
    """A model from its two files' contents, checked against each other."""
    if meta.get("format") != FORMAT:
        raise ValueError(f"learned model format {meta.get('format')!r}; this gateway reads {FORMAT}")
    features = meta["features"]
    if (features["hash"], features["char_ngram"], features["max_word"]) != ("crc32", CHAR_NGRAM, MAX_WORD):
        raise ValueError("the learned model was trained with other features than this gateway computes")
    if hashlib.sha256(packed).hexdigest() != meta["weights_sha256"]:
        raise ValueError(f"{WEIGHTS_FILE} does not match its {META_FILE} (weights_sha256)")
    weights = array("h", zlib.decompress(packed))
    if sys.byteorder == "big":
        weights.byteswap()
    limits = meta["thresholds"]
    thresholds = Thresholds(alone=float(limits["alone"]), with_signal=float(limits["with_signal"]))
    return LearnedModel(weights, float(meta["scale"]), float(meta["bias"]), int(features["bits"]), thresholds)


@cache
def shipped() -> LearnedModel:
    """The model shipped in this package (loaded once per process, on first use)."""
    folder = resources.files(__name__.rpartition(".")[0])
    meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
    return read((folder / WEIGHTS_FILE).read_bytes(), meta)
