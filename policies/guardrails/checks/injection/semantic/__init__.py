"""Signals of the `injection` check that read what a text asks for rather than how it words an override:
exfiltration shapes in URLs (`exfiltration`), requests for the means of serious harm (`harm`),
disguise-and-reconstruction games (`reconstruction`), and instructions addressed to the model inside
the data it is given (`embedded`). Each is a function from a folded text to spans, gated by a cheap
test so that a text without its anchors costs a set intersection or a ``find``."""

from __future__ import annotations

from policies.guardrails.base import Span
from policies.guardrails.checks.injection.semantic import embedded, exfiltration, harm, reconstruction
from policies.guardrails.normalize import Folded

WEIGHTS: dict[str, float] = exfiltration.WEIGHTS | harm.WEIGHTS | reconstruction.WEIGHTS
CUES = reconstruction.CUES


def spans(folded: Folded, found: list[Span]) -> list[Span]:
    """Every structural signal of this package in one text (cue-shaped ones are in `CUES`, found before
    these: `found` holds them, and a reconstruction game's rules decide whether its pieces are rebuilt)."""
    labels = {span.label for span in found}
    found_here = exfiltration.spans(folded) + embedded.spans(folded) + harm.spans(folded)
    return found_here + reconstruction.spans(folded, labels)
