"""`json`: the output must be valid JSON, and conform to ``schema`` (JSON Schema, any draft) if given.

Parsing is orjson's, validation is the `jsonschema` library's. Reasons name the failing location and
schema keyword, never the offending value (a denied answer must not leak through its reason).
On streams this is an end-of-text check (see `stream_guard`).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import orjson
from jsonschema import exceptions, validators
from pydantic import Field, field_validator

from policies.guardrails.base import PASS, CheckConfig, Finding, RequestFacts
from policies.guardrails.verdict import Stage

_FENCE = "```"


class JsonConfig(CheckConfig):
    actions: ClassVar[frozenset[str]] = frozenset({"deny", "flag"})

    check: Literal["json"]
    # A JSON Schema the answer must match (it must at least be JSON).
    json_schema: dict[str, Any] | None = Field(default=None, alias="schema")
    strip_fences: bool = False  # accept a ```json fenced block as the JSON

    @field_validator("json_schema")
    @classmethod
    def _valid_schema(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            try:
                validators.validator_for(value).check_schema(value)
            except exceptions.SchemaError as exc:
                raise ValueError(f"invalid JSON schema: {exc.message}") from exc
        return value

    def build(self) -> JsonCheck:
        return JsonCheck(self)


class JsonCheck:
    is_async = False
    needs_text = True

    def __init__(self, config: JsonConfig) -> None:
        self.config = config
        schema = config.json_schema
        self._validator = None if schema is None else validators.validator_for(schema)(schema)

    def evaluate(self, text: str, facts: RequestFacts, stage: Stage, index: int) -> Finding:
        body = _unfence(text) if self.config.strip_fences else text
        try:
            document = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            return Finding(hit=True, reason=f"not valid JSON: {exc}", labels=("syntax",))
        if self._validator is None:
            return PASS
        error = exceptions.best_match(self._validator.iter_errors(document))
        if error is None:
            return PASS
        where = "$" + "".join(f"[{part!r}]" for part in error.absolute_path)
        reason = f"does not match the schema at {where}: fails {error.validator!r} ({error.validator_value!r})"
        return Finding(hit=True, reason=reason[:300], labels=("schema",))

    async def evaluate_async(self, text: str, facts: RequestFacts, stage: Stage, index: int) -> Finding:
        return self.evaluate(text, facts, stage, index)


def _unfence(text: str) -> str:
    stripped = text.strip()
    if stripped.startswith(_FENCE) and stripped.endswith(_FENCE) and len(stripped) >= 6:
        body = stripped[3:-3]
        newline = body.find("\n")
        return body[newline + 1 :] if newline != -1 else body
    return text
