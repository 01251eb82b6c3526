"""A deployment's guardrails: the input and output guards built from its policies' checks."""

from __future__ import annotations

from dataclasses import dataclass

from policies.guardrails.input_guard import InputGuard
from policies.guardrails.output_guard import OutputGuard


@dataclass(frozen=True, slots=True)
class Guards:
    input: InputGuard
    output: OutputGuard
    policy: str  # the names of the policies with checks, for the verdicts' metrics label
