"""`injection`: a layered prompt-injection and jailbreak detector, a weighted sum of signals.

Layers:
1. **Views.** The folded text (width, case, accents, zero-width and look-alike tricks undone;
   Unicode tag characters read, not dropped), plus one view per decoded carrier (`decoded`):
   base64, hex, Morse, ROT13, reversed text, leetspeak, spaced letters, and text hidden in
   invisible characters. Every view is checked with every signal, and views are built only while
   the text's own signals stay below the threshold (weights only add: no view can undo a hit).
2. **Signals** (`signals`), each with a weight:
   - instruction override: a dismissal verb and the model's instructions within a few words
     (``ignore`` … ``previous`` … ``instructions``), instructions declared void, "new instructions:",
     the user's task overridden, a forced quoted output (``just print "…"``);
   - indirect injection inside data: text addressed to the model (``note to the AI``, ``if you are a
     language model``), authority claims (``note by a trusted expert``), ``if asked … respond``,
     requests to keep the note secret or not to deviate, ``[system]``-style notes, chat-template
     turn markers inside the content (``\\nAssistant: … \\nUser: …``; a prompt that *is* a transcript
     from its first line is a format, not an injection), special tokens;
   - extraction: requests to reproduce the model's instructions, initialization, preamble or the text
     before the conversation, verbatim;
   - persona and rule-free modes: a persona frame near a rule-free attribute (amoral, unfiltered,
     no ethical guidelines, never refuses), settings blocks that switch protections off
     (``SAFETY RESTRICTIONS: NONE``), requests to update the model's behaviour or guidelines,
     claimed clearance, special modes, refusal suppression;
   - semantic (`semantic`): exfiltration URLs built from the conversation's data, requests for the
     means of serious harm (and the same named in a story), emotional pretexts, reconstruction games
     by their rules with the hidden request rebuilt and judged, jailbreak framings (forced openings,
     dual answers, penalty games, filter evasion, fiction with a demand for realism);
   - obfuscation: each decoded carrier adds its own weight (``base64``, ``hidden_text``, …), and a
     request to decode it (``decode_request``) adds more.
3. **Score**: the sum of the weights of the distinct signals found; the check hits at
   ``threshold`` (default 0.7). One strong signal (0.7 to 0.8) is enough; weak ones (0.2 to 0.5)
   need company. `BUILTIN_SIGNALS` lists every signal and its weight; ``disable`` turns signals (or
   decoded views, by their kind) off by name; ``patterns`` adds operator patterns with their own
   weights. Verdicts carry the fired signals' names as ``labels``, never the text they matched: all
   of the text's own signals, and the views' only when the text alone did not reach the threshold.
4. **Learned tier** (``learned``, off by default: `LEARNED_DEFAULT`; `learned.model`): while the
   score stays below the threshold, a logistic regression over the folded words and their character
   4-grams gives the probability that the text is an attack. The check also hits when it reaches
   ``learned_threshold``, or ``learned_with_signal`` while some signal fired (a weak signal alone
   would not deny). Both default to the thresholds tuned with the shipped model. It judges whole
   texts: its label ``learned`` (weight: the probability) is a zero-width span at offset 0, which a
   stream's windows never settle, so a streamed output is judged by the signals alone.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from policies.guardrails.base import NAME_PATTERN, PASS, CheckConfig, Finding, Span, trailing_token
from policies.guardrails.checks.injection import semantic, structure
from policies.guardrails.checks.injection import signals as sig
from policies.guardrails.checks.injection.decoded import ENCODED, Decoder, View
from policies.guardrails.checks.injection.learned.model import LearnedModel, Thresholds, shipped
from policies.guardrails.checks.injection.obfuscation import intent, suffix
from policies.guardrails.checks.injection.vocab import Spots
from policies.guardrails.checks.patterns import for_folded, vet_pattern
from policies.guardrails.normalize import Folded
from policies.guardrails.regex_safety import max_width

# The decoded views' own signals, with their weights.
VIEW_WEIGHTS: dict[str, float] = {
    "base64": 0.3,  # a decoded carrier holding readable text
    "hex": 0.3,
    "morse": 0.3,
    "rot13": 0.3,
    "reversed": 0.3,
    "hidden_text": 0.8,  # readable text in invisible characters
    "leetspeak": 0.3,  # a signal found only once digits were read as letters
    "spaced": 0.3,  # a signal found only once spaced letters were joined
}
STRUCTURAL = structure.WEIGHTS | semantic.WEIGHTS | VIEW_WEIGHTS | intent.WEIGHTS  # intent: the obfuscation families
BUILTIN_SIGNALS: dict[str, float] = {cue.name: cue.weight for cue in sig.CUES if cue.weight} | STRUCTURAL
BUILTIN_PATTERNS = BUILTIN_SIGNALS  # the former name, still accepted by importers
ALIASES = {"forget_everything": "ignore_instructions", "fake_role_turn": "embedded_turn"}  # former signal names
VIEW_LABELS = {"hidden": "hidden_text"} | intent.LABELS
_COMBINED = frozenset({"persona_frame"}) | structure.PERSONA_PARTS  # kept for pairing: up to _MAX_MATCHES each
_MAX_MATCHES = 4  # per signal and view: enough to place pairs, bounded on hostile text
LEARNED = "learned"  # the learned tier's label; its span's weight is the model's probability
LEARNED_DEFAULT = False  # held out, it raised no family's recall within 2% benign denied (docs/guardrails.md)
_DECODED_HOLD = 1024  # streams: a trailing token this long may still be an encoded payload
_MAX_HOLD = 512  # streams: the most characters a built-in signal's match is held back for


@cache
def builtin_width() -> int:
    """The widest match of any built-in signal (parsing every pattern once per process, not per check)."""
    return max(max_width(pattern.pattern) or 256 for cue in sig.CUES for pattern in cue.patterns)


class InjectionPattern(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # The signal's name, in verdicts and `disable` lists.
    name: str = Field(pattern=NAME_PATTERN)
    # A regular expression matched against the folded text.
    pattern: str
    # What the signal adds to the score when it matches.
    weight: float = Field(gt=0.0, le=1.0)

    @field_validator("pattern")
    @classmethod
    def _vet(cls, value: str) -> str:
        return vet_pattern(value)


class InjectionConfig(CheckConfig):
    actions: ClassVar[frozenset[str]] = frozenset({"deny", "flag"})

    check: Literal["injection"]
    # A text whose signals' weights sum to this is a hit.
    threshold: float = Field(default=0.7, gt=0.0)
    # Signals of your own, added to the built-in ones.
    patterns: list[InjectionPattern] = Field(default_factory=list)
    # Built-in signals to ignore, by name.
    disable: list[str] = Field(default_factory=list)
    # Also ask the learned tier (a small model shipped with the gateway) when the signals do not deny.
    learned: bool = LEARNED_DEFAULT
    # The model's probability that denies a text alone (default: the threshold tuned with the model).
    learned_threshold: float | None = Field(default=None, gt=0.0, le=1.0)
    # The probability that denies a text in which some weak signal fired (default: tuned likewise).
    learned_with_signal: float | None = Field(default=None, gt=0.0, le=1.0)

    @field_validator("patterns")
    @classmethod
    def _own_names(cls, value: list[InjectionPattern]) -> list[InjectionPattern]:
        if any(pattern.name == LEARNED for pattern in value):
            raise ValueError(f"the pattern name {LEARNED!r} is the learned tier's label; choose another")
        return value

    @field_validator("disable")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        unknown = sorted(set(value) - set(BUILTIN_SIGNALS) - set(ALIASES) - set(VIEW_LABELS) - {"persona_frame"})
        if unknown:
            raise ValueError(f"unknown built-in patterns {unknown}; known: {', '.join(BUILTIN_SIGNALS)}")
        return value

    def build(self) -> InjectionCheck:
        return InjectionCheck(self)


class InjectionCheck:
    def __init__(self, config: InjectionConfig) -> None:
        self.config = config
        off = {ALIASES.get(name, VIEW_LABELS.get(name, name)) for name in config.disable}
        self._off = off
        self._cues = [cue for cue in sig.CUES if cue.name not in off]
        self._anchors = frozenset().union(*(cue.anchor_words for cue in self._cues))
        by_anchor: dict[bytes, list[int]] = {}
        for number, cue in enumerate(self._cues):
            for word in cue.anchor_words:
                by_anchor.setdefault(word, []).append(number)
        self._by_anchor = {word: tuple(numbers) for word, numbers in by_anchor.items()}
        self._marked = tuple(number for number, cue in enumerate(self._cues) if cue.marks)
        # Gates, numbered: a text's open gates come from one pass over its words that open any, and
        # a cue then needs one subset test, not a test per gate.
        gates = list(dict.fromkeys(gate for cue in self._cues for gate in cue.gates))
        opened_by: dict[bytes, list[int]] = {}
        for number, gate in enumerate(gates):
            for word in gate:
                opened_by.setdefault(word, []).append(number)
        self._opened_by = {word: tuple(numbers) for word, numbers in opened_by.items()}
        self._gate_words = frozenset(opened_by)
        self._all_gates = frozenset(range(len(gates)))
        # gate -> the cues that need it: a text's closed gates rule their cues out in one C-level union
        self._closing: dict[int, tuple[int, ...]] = {
            gate: tuple(number for number, cue in enumerate(self._cues) if gates[gate] in cue.gates)
            for gate in range(len(gates))
        }
        extra = [(p.name, for_folded(p.pattern, True), p.weight) for p in config.patterns]
        self._extra = [(name, re.compile(pattern), weight) for name, pattern, weight in extra]
        self._views = not {"base64", "hex", "morse", "rot13", "reversed", "leetspeak", "spaced", "hidden_text"} <= off
        self._suffix = "gibberish_suffix" not in off
        self._decoder = Decoder(sig.VOCABULARY)
        widths = [builtin_width()] + [max_width(pattern) or 256 for _, pattern, _ in extra]
        self._window = min(max(widths), _MAX_HOLD) + 1
        self._learned: LearnedModel | None = shipped() if config.learned else None
        tuned = self._learned.thresholds if self._learned is not None else Thresholds(1.0, 1.0)
        alone = config.learned_threshold if config.learned_threshold is not None else tuned.alone
        with_signal = config.learned_with_signal if config.learned_with_signal is not None else tuned.with_signal
        self._thresholds = Thresholds(alone, min(alone, with_signal))

    def spans(self, folded: Folded) -> list[Span]:
        """Every signal of the text itself; the decoded views' only while those leave the verdict open
        (weights only add: once the text's own signals reach the threshold, no view can undo the hit);
        the learned tier's probability only while they all still do."""
        found = self._scan(folded)
        found += structure.inside_data(folded, found)
        kept = self._kept(found)
        if self._views and self._open(kept):
            kept += self._kept(self._decoded(folded, {span.label for span in found if span.weight}))
        if self._learned is not None and self._open(kept):
            probability = self._learned.probability(folded.words)
            if probability >= self._thresholds.with_signal:
                kept.append(Span(0, 0, LEARNED, probability))  # zero-width: see the module's docstring
        return kept

    def _open(self, kept: list[Span]) -> bool:
        return sum(_weights(kept).values()) < self.config.threshold

    def judge(self, spans: Sequence[Span]) -> Finding:
        weights = _weights(spans)
        probability = weights.pop(LEARNED, 0.0)
        labels = (*weights, LEARNED) if probability else tuple(weights)
        score = sum(weights.values())
        if score >= self.config.threshold:
            reason = f"injection score {score:.2f} >= {self.config.threshold:.2f} ({', '.join(weights)})"
            return Finding(hit=True, reason=reason, score=score, labels=labels)
        if probability >= self._thresholds.alone or (score and probability >= self._thresholds.with_signal):
            limit = self._thresholds.alone if probability >= self._thresholds.alone else self._thresholds.with_signal
            signals = f" with {', '.join(weights)}" if weights else ""
            reason = f"injection: learned model {probability:.2f} >= {limit:.2f}{signals}"
            return Finding(hit=True, reason=reason, score=score, labels=labels)
        return PASS if not labels else Finding(hit=False, score=score, labels=labels)

    def _kept(self, spans: list[Span]) -> list[Span]:
        return [span for span in spans if span.weight and span.label not in self._off]

    def hold(self, folded: str) -> int:
        return max(self._window, trailing_token(folded, _DECODED_HOLD)) if self._views else self._window

    def placeholder(self, span: Span) -> str:
        return "[REDACTED]"

    def _scan(self, folded: Folded) -> list[Span]:
        """The signals of one view, at their original offsets (zero-weight parts of pairs included)."""
        text, words = folded.text, folded.words
        present = self._anchors & words
        spots = Spots(text, words)
        found: list[Span] = []
        # The cues an anchor (or a mark) may start, less those a closed gate rules out: set operations
        # in C over the text's words, so that the loop below only visits the cues it tries.
        candidates = set(self._marked).union(*map(self._by_anchor.__getitem__, present))
        opened = set().union(*map(self._opened_by.__getitem__, self._gate_words & words))
        candidates.difference_update(*map(self._closing.__getitem__, self._all_gates - opened))
        fired: set[str] = set()
        cues = self._cues
        for number in sorted(candidates):  # in table order: reported labels keep a stable order
            cue = cues[number]
            if cue.name in fired and cue.name not in _COMBINED:
                continue  # another cue of this signal fired: the score counts each signal once
            matches = 0
            for at, pattern in cue.attempts(spots, present):
                match = pattern.match(text, at)
                if match is None or (cue.accept is not None and not cue.accept(text, match)):
                    continue
                found.append(Span(*folded.span(at, match.end()), label=cue.name, weight=cue.weight))
                fired.add(cue.name)
                matches += 1
                if matches == _MAX_MATCHES or cue.name not in _COMBINED:
                    break
        for name, pattern, weight in self._extra:
            extra = pattern.search(text)
            if extra is not None:
                found.append(Span(*folded.span(*extra.span()), label=name, weight=weight))
        found += structure.turns(folded, spots) + structure.special_tokens(folded) + structure.settings(folded)
        found += semantic.spans(folded, found)
        found += structure.persona(found)
        return found

    def _decoded(self, folded: Folded, seen: set[str]) -> list[Span]:
        """The signals of every decoded view, each at its carrier's offsets, the views' own signals, the
        request around the carriers (`intent`), and an optimised suffix (`suffix`)."""
        found: list[Span] = []
        carriers: list[View] = []
        for view in self._decoder.views(folded):
            label = VIEW_LABELS.get(view.kind, view.kind)
            if label in self._off:
                continue
            inside = [s for s in self._scan(view.folded) if s.weight]
            if not view.aligned:
                inside = [Span(view.start, view.end, s.label, s.weight) for s in inside]
            found += inside
            # leetspeak, spaced and split words weigh only when reading them revealed something: a signal,
            # or a request the text as written does not make
            if (
                view.kind in ENCODED
                or view.kind == "hidden"
                or {s.label for s in inside} - seen
                or intent.reveals_request(view.folded, folded, reordered=view.kind == "reversed_words")
            ):
                found.append(Span(view.start, view.end, label, STRUCTURAL[label]))
                carriers.append(view)
        if carriers:
            found += intent.around(folded, carriers)
        tail = suffix.gibberish_tail(folded.source) if self._suffix else None
        if tail is not None:
            found.append(Span(*tail, "gibberish_suffix", suffix.WEIGHT))
        return found


def _weights(spans: Sequence[Span]) -> dict[str, float]:
    """Each distinct signal's weight (its heaviest span), in the order found: the score adds them."""
    weights: dict[str, float] = {}
    for span in spans:
        weights[span.label] = max(weights.get(span.label, 0.0), span.weight)
    return weights
