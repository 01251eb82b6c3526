"""The `input:` and `output:` lists of a policy: one entry per check, chosen by its `check:` key.

    policies:
      default:
        input:  [{check: pii, action: redact}, {check: regex, pattern: "(?i)ignore previous", action: deny}]
        output: [{check: pii, action: redact}, {check: grounded, min_score: 0.6, action: flag}]

`InputChecks` / `OutputChecks` validate that each check applies to its stage (``grounded`` reads an
answer, so it is output-only) and that names are unique within a list (``name:`` tells two checks of
one kind apart in verdicts).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Annotated

from pydantic import AfterValidator, Field

from policies.guardrails.checks.classifier.check import ClassifierConfig
from policies.guardrails.checks.grounded import GroundedConfig
from policies.guardrails.checks.injection.check import InjectionConfig
from policies.guardrails.checks.json_shape import JsonConfig
from policies.guardrails.checks.length import LengthConfig
from policies.guardrails.checks.patterns import RegexConfig
from policies.guardrails.checks.pii.check import PiiConfig
from policies.guardrails.checks.webhook import WebhookConfig
from policies.guardrails.checks.words import WordsConfig
from policies.guardrails.verdict import Stage

GuardrailCheck = Annotated[
    RegexConfig
    | WordsConfig
    | PiiConfig
    | LengthConfig
    | InjectionConfig
    | JsonConfig
    | GroundedConfig
    | WebhookConfig
    | ClassifierConfig,
    Field(discriminator="check"),
]


def _stage_validator(stage: Stage) -> Callable[[list[GuardrailCheck]], list[GuardrailCheck]]:
    def validate(checks: list[GuardrailCheck]) -> list[GuardrailCheck]:
        wrong = [f"[{i}] {c.check}" for i, c in enumerate(checks) if stage not in c.stages]
        if wrong:
            raise ValueError(f"checks that cannot run on {stage}: {', '.join(wrong)}")
        twice = sorted(label for label, count in Counter(c.label for c in checks).items() if count > 1)
        if twice:
            raise ValueError(f"several checks named {twice}: give each a distinct `name`")
        return checks

    return validate


InputChecks = Annotated[list[GuardrailCheck], AfterValidator(_stage_validator("input"))]
OutputChecks = Annotated[list[GuardrailCheck], AfterValidator(_stage_validator("output"))]
