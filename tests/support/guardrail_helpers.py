"""Builders shared by the guardrail tests: real config validation, real guards."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from policies.guardrails import InputChecks, InputGuard, InputOutcome, OutputChecks, OutputGuard, RequestFacts

INPUT = TypeAdapter(InputChecks)
OUTPUT = TypeAdapter(OutputChecks)


def fullwidth(text: str) -> str:
    """ASCII letters as their fullwidth forms (U+FF21...), the classic filter-evasion trick."""
    return "".join(chr(ord(c) + 0xFEE0) if c.isascii() and c.isalnum() else c for c in text)


def input_guard(*checks: dict[str, Any]) -> InputGuard:
    return InputGuard(INPUT.validate_python(list(checks)))


def output_guard(*checks: dict[str, Any]) -> OutputGuard:
    return OutputGuard(OUTPUT.validate_python(list(checks)))


async def check_input(check: dict[str, Any], prompt: Any, **facts: Any) -> InputOutcome:
    return await input_guard(check).check(prompt, RequestFacts(**facts))


def verdict_of(outcome: InputOutcome) -> str:
    return outcome.verdicts[0].verdict
