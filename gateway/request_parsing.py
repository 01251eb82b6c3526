"""Turn raw request bytes into a validated `CompletionRequest`, or an OpenAI-style 400 naming the field."""

from __future__ import annotations

import json
import math
from typing import Any

import orjson
from pydantic import ValidationError
from pydantic_core import ErrorDetails

from gateway.errors import GatewayError, InvalidRequest
from gateway.schemas import INT64_MIN, CompletionRequest, FieldError

JSON_CONTENT_TYPES = frozenset({"application/json", ""})

# Fields typed as a union: pydantic reports one error per member, we report the accepted shapes.
_UNION_SHAPES = {"stop": "a string, an array of 1 to 4 strings, or null"}


class UnsupportedMediaType(GatewayError):
    status = 415
    type = "invalid_request_error"
    code = "unsupported_media_type"


def decode_json_object(body: bytes, content_type: str) -> dict[str, Any]:
    """Parse the body as one JSON object; every way it can fail gets its own clear message."""
    if content_type not in JSON_CONTENT_TYPES:
        raise UnsupportedMediaType(
            f"Content-Type must be application/json, got {content_type!r}.", param="Content-Type"
        )
    if not body:
        raise InvalidRequest("The request body is empty; send a JSON object.", code="invalid_json")
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        payload = _with_wide_numbers(body, exc)
    if not isinstance(payload, dict):
        raise InvalidRequest(
            f"The request body must be a JSON object, got a JSON {_json_kind(payload)}.", code="invalid_json"
        )
    return payload


def _with_wide_numbers(body: bytes, exc: orjson.JSONDecodeError) -> Any:
    """orjson refuses valid JSON whose numbers overflow a double (1e400). Such a body is parsed
    again by the standard library, so that the field gets its own 400 naming it; anything else
    orjson refused is reported as it said."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as utf8_exc:
        raise InvalidRequest(
            f"The request body is not valid UTF-8 (byte {utf8_exc.start}).", code="invalid_encoding"
        ) from None
    if "number" in exc.msg:
        try:
            return json.loads(body, parse_int=_json_int, parse_constant=_no_constant)
        except ValueError:
            pass
    raise InvalidRequest(
        f"The request body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}.",
        code="invalid_json",
    ) from None


def _json_int(text: str) -> int | float:
    """As orjson reads integers: past 64 bits, a float (so that an extra field can be sent on)."""
    value = int(text)
    return value if INT64_MIN <= value < 2**64 else float(text)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def validate_completion(payload: dict[str, Any]) -> CompletionRequest:
    try:
        return CompletionRequest.model_validate(payload)
    except ValidationError as exc:
        raise _to_invalid_request(exc.errors()) from None


def _to_invalid_request(errors: list[ErrorDetails]) -> InvalidRequest:
    problems: dict[str, str] = {}
    for error in errors:
        param, message = _describe(error)
        problems.setdefault(param, message)
    first = next(iter(problems))
    return InvalidRequest(" ".join(problems.values()), param=first, code="invalid_value")


def _describe(error: ErrorDetails) -> tuple[str, str]:
    ctx_error = (error.get("ctx") or {}).get("error")
    if isinstance(ctx_error, FieldError):
        return ctx_error.field, f"Invalid '{ctx_error.field}': {ctx_error.message}."
    loc = [part for part in error["loc"]]
    field = str(loc[0]) if loc else "body"
    if field in _UNION_SHAPES:
        return field, f"Invalid '{field}': must be {_UNION_SHAPES[field]}."
    param = field + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc[1:])
    if error["type"] == "missing":
        return param, f"Missing required parameter: '{param}'."
    if error["type"] == "extra_forbidden":
        return param, f"Unrecognized parameter: '{param}'."
    message = error["msg"].removeprefix("Value error, ")
    return param, f"Invalid '{param}': {message[0].lower()}{message[1:]} (got {_preview(error['input'])})."


def _preview(value: Any) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return "a number too large to represent"  # orjson would write null
    text = orjson.dumps(value, default=str).decode()
    return text if len(text) <= 60 else text[:57] + "..."


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    return "number"
