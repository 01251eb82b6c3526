"""The built-in signals of the `injection` check: which shapes, built from which word classes, weigh what.

A signal is a *shape*, not a phrase: a class of verbs near a class of nouns within a window of one
sentence, a request to reproduce the model's own instructions, a persona frame next to a rule-free
attribute. No pattern names a particular published attack; each class was written from what the
attacks of a family have in common (tests/data/guardrails/README.md lists the families). Building
blocks and the anchored matching: `vocab`. Structural signals (turn markers, settings
blocks): `structure`.
"""

from __future__ import annotations

from policies.guardrails.checks.injection.extraction import CUES as EXTRACTION
from policies.guardrails.checks.injection.framing import CUES as FRAMING
from policies.guardrails.checks.injection.indirect import CUES as INDIRECT
from policies.guardrails.checks.injection.override import CUES as OVERRIDE
from policies.guardrails.checks.injection.persona import CUES as PERSONA
from policies.guardrails.checks.injection.semantic import CUES as SEMANTIC
from policies.guardrails.checks.injection.vocab import QUALIFIERS, Cue

CUES: tuple[Cue, ...] = (*OVERRIDE, *INDIRECT, *EXTRACTION, *PERSONA, *FRAMING, *SEMANTIC)
VOCABULARY = frozenset(a.decode() for c in CUES for a in c.anchor_words) | QUALIFIERS
VOCABULARY |= frozenset(w.decode() for c in CUES for gate in c.gates for w in gate)
VOCABULARY |= frozenset(
    ["previous", "instructions", "guidelines", "rules", "earlier", "directions", "original", "everything"]
)
