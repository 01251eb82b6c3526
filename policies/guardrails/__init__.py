"""Input and output guardrails: deny, redact or flag prompts and completions, streams included.

The pipeline builds one `InputGuard` and one `OutputGuard` per deployment from its policies'
``input:`` / ``output:`` lists (`InputChecks` / `OutputChecks` in the config), then per request:
`pop_context` (the grounding document, never sent upstream), `InputGuard.check` before the
upstream call, `OutputGuard.check` on a whole response or `OutputGuard.stream` → `StreamGuard`
on a stream. Verdict formats: see `verdict`; what one request's guardrail work may cost: `bounds`.
"""

from policies.guardrails.base import Decoder, RequestFacts
from policies.guardrails.bounds import GuardrailBounds, combine_bounds
from policies.guardrails.checks.grounded import GroundedConfig
from policies.guardrails.checks.injection.check import BUILTIN_PATTERNS, InjectionConfig
from policies.guardrails.checks.json_shape import JsonConfig
from policies.guardrails.checks.length import LengthConfig
from policies.guardrails.checks.patterns import RegexConfig
from policies.guardrails.checks.pii.check import ENTITIES, PiiConfig
from policies.guardrails.checks.webhook import WebhookConfig, close_webhook_sessions
from policies.guardrails.checks.words import WordsConfig
from policies.guardrails.config import GuardrailCheck, InputChecks, OutputChecks
from policies.guardrails.context import CONTEXT_KEYS, pop_context
from policies.guardrails.guards import Guards
from policies.guardrails.input_guard import MAX_FIELD_STRINGS, FieldsOutcome, InputGuard, InputOutcome
from policies.guardrails.output_guard import ChoiceOutcome, OutputGuard, OutputOutcome
from policies.guardrails.stream_guard import StreamGuard, StreamStep
from policies.guardrails.verdict import (
    BODY_FIELD,
    HEADER,
    GuardrailViolation,
    Verdict,
    header_value,
    results_body,
)

__all__ = [
    "BODY_FIELD",
    "BUILTIN_PATTERNS",
    "CONTEXT_KEYS",
    "ENTITIES",
    "HEADER",
    "MAX_FIELD_STRINGS",
    "ChoiceOutcome",
    "Decoder",
    "FieldsOutcome",
    "GroundedConfig",
    "GuardrailBounds",
    "GuardrailCheck",
    "GuardrailViolation",
    "Guards",
    "InjectionConfig",
    "InputChecks",
    "InputGuard",
    "InputOutcome",
    "JsonConfig",
    "LengthConfig",
    "OutputChecks",
    "OutputGuard",
    "OutputOutcome",
    "PiiConfig",
    "RegexConfig",
    "RequestFacts",
    "StreamGuard",
    "StreamStep",
    "Verdict",
    "WebhookConfig",
    "WordsConfig",
    "close_webhook_sessions",
    "combine_bounds",
    "header_value",
    "pop_context",
    "results_body",
]
