"""Instructions addressed to the model in a data format's keys: ``assistant_directive="…"`` in a log
line, ``<meta name="ai-instructions" content="…">`` in a page, ``llm-note: …`` in a config file.

A key that names the model and calls its value an instruction is written for the model that reads the
data, whatever the value says. Each ``_`` and ``-`` (found with ``find``) is tried for an instruction
word, then the few characters before it for the model's name.
"""

from __future__ import annotations

import re

from policies.guardrails.base import Span
from policies.guardrails.normalize import Folded

WEIGHTS: dict[str, float] = {"addressed_to_ai": 0.5}

_KEY = re.compile(
    r"[_-](?:directives?|instructions?|notes?|commands?|prompts?|tasks?)[\"']?\s{0,3}(?:=|:|content\s{0,3}=)"
)
_ADDRESSEE = re.compile(r"(?:^|[^a-z])(?:ai|assistant|llm|model|bot|gpt|agent|copilot|chatbot)$")
_MAX_KEYS = 16


def spans(folded: Folded) -> list[Span]:
    text = folded.text
    for mark in "_-":
        at = text.find(mark)
        tried = 0
        while at != -1 and tried < _MAX_KEYS:
            key = _KEY.match(text, at)
            if key is not None:
                tried += 1
                if _ADDRESSEE.search(text, max(0, at - 12), at) is not None:
                    start = text.rfind(" ", 0, at) + 1
                    return [Span(*folded.span(start, key.end()), "addressed_to_ai", WEIGHTS["addressed_to_ai"])]
            at = text.find(mark, at + 1)
    return []
