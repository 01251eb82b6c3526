"""Verdicts: what each guardrail check decided, and how verdicts travel to the client.

Body: the response (and the final chunk of a stream) carries ``guardrail_results``, a list with one
object per check and stage (per choice on output), in the order the checks ran::

    "guardrail_results": [
      {"stage": "input", "check": "pii", "verdict": "redact", "reason": "redacted email", "labels": ["email"]},
      {"stage": "output", "check": "json", "verdict": "flag", "index": 1, "reason": "not valid JSON: ..."}
    ]

``verdict`` is one of ``pass``, ``deny``, ``redact``, ``flag`` (the check's action, taken), ``skipped``
(the check could not run, e.g. a token-id prompt with no tokenizer: never a silent pass) or ``error``
(a remote check failed and its policy is fail-open). ``index`` is the prompt index (input, when the
prompt is a list) or the choice index (output); ``field`` names the body field an input verdict is
about when it is not ``prompt`` (``suffix``, or a field the Completions reference does not know).
``labels`` name what matched (PII entity, pattern name), never the matched text, so results never
echo the data a check protects. ``score`` is present for scored checks (injection, grounded).

Header: ``x-gateway-guardrails`` is the compact form, one ``<stage>.<check>=<verdict>`` item per check
and stage, comma-separated, the worst verdict over choices and prompts (deny > error > redact > flag >
skipped > pass), e.g. ``input.pii=redact, input.injection=pass, output.json=flag``. Its size is bounded
by the number of configured checks, not by ``n``. A streamed response sends its headers before output
checks finish, so its header carries the input verdicts only; the final chunk carries them all.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from gateway.api.errors import GatewayError

Action = Literal["deny", "redact", "flag"]
Stage = Literal["input", "output"]
Outcome = Literal["pass", "deny", "redact", "flag", "skipped", "error"]

HEADER = "x-gateway-guardrails"
BODY_FIELD = "guardrail_results"
SEVERITY: dict[str, int] = {"pass": 0, "skipped": 1, "flag": 2, "redact": 3, "error": 4, "deny": 5}


@dataclass(frozen=True, slots=True)
class Verdict:
    check: str
    stage: Stage
    verdict: Outcome
    reason: str | None = None
    index: int | None = None
    score: float | None = None
    labels: tuple[str, ...] = ()
    field: str | None = None  # input: the body field other than `prompt` that was checked (`suffix`, ...)
    code: str | None = None  # a refusal by a bound, not by a check's judgement: the 400's error code

    def placed(self, index: int | None, field: str | None) -> Verdict:
        """This verdict for the text at another index or field (`dataclasses.replace` validates each
        field, which costs several times more on every guarded request)."""
        return Verdict(
            self.check, self.stage, self.verdict, self.reason, index, self.score, self.labels, field, self.code
        )

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"stage": self.stage, "check": self.check, "verdict": self.verdict}
        if self.index is not None:
            out["index"] = self.index
        if self.field is not None:
            out["field"] = self.field
        if self.reason:
            out["reason"] = self.reason
        if self.score is not None:
            out["score"] = round(self.score, 4)
        if self.labels:
            out["labels"] = list(self.labels)
        return out


def results_body(verdicts: Iterable[Verdict]) -> list[dict[str, Any]]:
    """The ``guardrail_results`` value."""
    return [verdict.as_dict() for verdict in verdicts]


def header_value(verdicts: Iterable[Verdict]) -> str:
    """The ``x-gateway-guardrails`` value: the worst verdict per stage and check, in first-seen order."""
    worst: dict[tuple[str, str], str] = {}
    for verdict in verdicts:
        key = (verdict.stage, verdict.check)
        seen = worst.get(key)
        if seen is None or SEVERITY[verdict.verdict] > SEVERITY[seen]:
            worst[key] = verdict.verdict
    return ", ".join(f"{stage}.{check}={outcome}" for (stage, check), outcome in worst.items())


class GuardrailViolation(GatewayError):
    """A deny: 400 on input (nothing went upstream); on output, the status the policy chose."""

    status = 400
    type = "guardrail_violation"
    code = "guardrail_violation"

    def __init__(self, verdict: Verdict, *, status: int | None = None) -> None:
        where = "input" if verdict.stage == "input" else "output"
        if verdict.field is not None:
            where = f"input field {verdict.field!r}"
        param = (verdict.field or "prompt") if verdict.stage == "input" else None
        if verdict.code is not None:  # a bound of the request's guardrail work (see `bounds`)
            message = f"The request is too large for its guardrails at {where}: {verdict.reason}"
            super().__init__(message, param=param, code=verdict.code, type="invalid_request_error")
        else:
            message = f"The {where} was denied by guardrail {verdict.check!r}: {verdict.reason or 'policy violation'}"
            super().__init__(message, param=param, status=status)
        self.verdict = verdict
        self.policy = ""  # the policies whose check denied, for metrics (set by the caller)
