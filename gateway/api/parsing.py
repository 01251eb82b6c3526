"""Turn raw request bytes into a validated `CompletionRequest`, or an OpenAI-style 400 naming the field."""

from __future__ import annotations

import json
import math
import re
from typing import Any

import orjson
from pydantic import ValidationError
from pydantic_core import ErrorDetails

from gateway.api.chat import CONTENT_SHAPE, TAG_FIELDS, UNION_TAGS, ChatRequest
from gateway.api.embeddings import EmbeddingsRequest
from gateway.api.errors import GatewayError, InvalidRequest
from gateway.api.schemas import INT64_MIN, CompletionRequest, FieldError

JSON_MEDIA_TYPE = "application/json"
# Nesting allowed in a body, the object itself being level 1: far beyond any real request, and far
# below what serializing it again (orjson stops at 254 levels) or a recursive walk can take.
MAX_JSON_DEPTH = 64
_INT_DIGITS_MAX = 20  # longer integers are past 2**64: read as floats, never int() (Python refuses 4300 digits)
_STRING_OR_BRACKET = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]')

# Fields typed as a union: pydantic reports one error per member, we report the accepted shapes.
_UNION_SHAPES = {"stop": "a string, an array of 1 to 4 strings, or null"}
_KNOWN_FIELDS = (
    frozenset(CompletionRequest.model_fields)
    | frozenset(ChatRequest.model_fields)
    | frozenset(EmbeddingsRequest.model_fields)
)


class UnsupportedMediaType(GatewayError):
    status = 415
    type = "invalid_request_error"
    code = "unsupported_media_type"


def decode_json_object(body: bytes, content_type: str | None) -> dict[str, Any]:
    """Parse the body as one JSON object; every way it can fail gets its own clear message.
    `content_type`: the Content-Type header as sent (None: absent, read as JSON)."""
    if content_type is not None and content_type.partition(";")[0].strip().lower() not in ("", JSON_MEDIA_TYPE):
        # Not quoted back: no header's value ever appears in a response.
        raise UnsupportedMediaType(
            "Content-Type must be application/json (or left out, which means JSON).", param="Content-Type"
        )
    return parse_json_object(body)


def parse_json_object(body: bytes) -> dict[str, Any]:
    """The body as a JSON object, its nesting and numbers bounded: a 400 naming the field otherwise."""
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
    if body.count(b"[") + body.count(b"{") > MAX_JSON_DEPTH:  # else no value can nest that deep
        for field, value in payload.items():
            if _nests_deeper(value, MAX_JSON_DEPTH - 1):
                raise _too_deep(str(field))
    return payload


def _with_wide_numbers(body: bytes, exc: orjson.JSONDecodeError) -> Any:
    """orjson refuses valid JSON whose numbers overflow a double (1e400). Such a body is parsed
    again by the standard library, so that the field gets its own 400 naming it; anything else
    orjson refused is reported as it said."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as utf8_exc:
        raise InvalidRequest(
            f"The request body is not valid UTF-8 (byte {utf8_exc.start}).", code="invalid_encoding"
        ) from None
    if "depth" in exc.msg or "recursion" in exc.msg:
        field = _field_at(body, len(text[: exc.pos].encode()))  # orjson counts characters, the scan bytes
        if field is not None:
            raise _too_deep(field) from None
        raise InvalidRequest(
            f"The request body nests arrays or objects more than {MAX_JSON_DEPTH} levels deep.", code="invalid_json"
        ) from None
    if "number" in exc.msg:
        try:
            payload = json.loads(body, parse_int=_json_int, parse_constant=_no_constant)
        except (ValueError, RecursionError):
            pass
        else:
            _refuse_unrepresentable(payload)
            return payload
    raise InvalidRequest(
        f"The request body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}.",
        code="invalid_json",
    ) from None


def _json_int(text: str) -> int | float:
    """As orjson reads integers: past 64 bits, a float (so that an extra field can be sent on)."""
    if len(text.lstrip("-")) > _INT_DIGITS_MAX:
        return float(text)  # float() has no digit limit; past 1e308 it is inf, refused below
    value = int(text)
    return value if INT64_MIN <= value < 2**64 else float(text)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _refuse_unrepresentable(payload: Any) -> None:
    """A number past a double's range (1e400) cannot be relayed: in a field the request model does
    not know, a 400 naming it (a known field's own check names it and says what range it takes)."""
    if not isinstance(payload, dict):
        return
    for field, value in payload.items():
        if field not in _KNOWN_FIELDS and _has_infinity(value):
            raise InvalidRequest(
                f"Invalid '{field}': it holds a number too large to represent.", param=str(field), code="invalid_value"
            )


def _has_infinity(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _nests_deeper(value: Any, levels: int) -> bool:
    """Whether `value` holds arrays or objects nested more than `levels` deep (breadth first: no recursion)."""
    level = [value] if isinstance(value, (dict, list)) else []
    for _ in range(levels):
        if not level:
            return False
        below: list[Any] = []
        for node in level:
            children = node.values() if isinstance(node, dict) else node
            below += [child for child in children if isinstance(child, (dict, list))]
        level = below
    return bool(level)


def _too_deep(field: str) -> InvalidRequest:
    return InvalidRequest(
        f"Invalid '{field}': arrays and objects may nest at most {MAX_JSON_DEPTH} levels deep in a request.",
        param=field,
        code="invalid_value",
    )


def _field_at(body: bytes, position: int) -> str | None:
    """The top-level field whose value spans `position` of a body too deep for the parser to read
    (found with a scan of the strings and brackets before it: the body was never parsed)."""
    depth, field, last_string = 0, None, None
    for match in _STRING_OR_BRACKET.finditer(body, 0, position):
        token = match.group()
        if token[0] == 0x22:  # '"'
            last_string = token
        elif token in (b"[", b"{"):
            if depth == 1 and last_string is not None:
                field = last_string
            depth += 1
        else:
            depth -= 1
            last_string = None
    if field is None:
        return None
    try:
        name = json.loads(field)
    except ValueError:
        return None
    return name if isinstance(name, str) else None


def validate_completion(payload: dict[str, Any]) -> CompletionRequest:
    try:
        return CompletionRequest.model_validate(payload)
    except ValidationError as exc:
        raise to_invalid_request(exc.errors()) from None


def validate_chat(payload: dict[str, Any]) -> ChatRequest:
    """A `/v1/chat/completions` body, or a 400 naming the field (`messages[2].role`, `tools[0].function.name`)."""
    try:
        return ChatRequest.model_validate(payload)
    except ValidationError as exc:
        raise to_invalid_request(exc.errors()) from None


def validate_embeddings(payload: dict[str, Any]) -> EmbeddingsRequest:
    """A `/v1/embeddings` body, or a 400 naming the field (`input[3]`, `dimensions`)."""
    try:
        return EmbeddingsRequest.model_validate(payload)
    except ValidationError as exc:
        raise to_invalid_request(exc.errors()) from None


def to_invalid_request(errors: list[ErrorDetails]) -> InvalidRequest:
    problems: dict[str, str] = {}
    for error in errors:
        param, message = _describe(error)
        problems.setdefault(param, message)
    first = next(iter(problems))
    return InvalidRequest(" ".join(problems.values()), param=first, code="invalid_value")


def _describe(error: ErrorDetails) -> tuple[str, str]:
    # A tagged union's member (`~user`, `~parts`) is not a field of the body: left out of the path.
    loc = [part for part in error["loc"] if not (isinstance(part, str) and part in UNION_TAGS)]
    ctx_error = (error.get("ctx") or {}).get("error")
    if isinstance(ctx_error, FieldError):  # a cross-field rule of the model at `loc` (the body's: empty)
        field = _path([*loc, ctx_error.field])
        return field, f"Invalid '{field}': {ctx_error.message}."
    field = str(loc[0]) if loc else "body"
    if field in _UNION_SHAPES:
        return field, f"Invalid '{field}': must be {_UNION_SHAPES[field]}."
    tag_field = TAG_FIELDS.get(error["type"])
    if tag_field is not None:  # the element's role or type names no member of the union
        found = error["input"].get(tag_field) if isinstance(error["input"], dict) else None
        if found is None:
            loc.append(tag_field)
            error = {**error, "type": "missing"} if isinstance(error["input"], dict) else error
        else:
            loc.append(tag_field)
            error = {**error, "input": found}
    param = _path(loc)
    if error["type"] == CONTENT_SHAPE:
        return param, f"Invalid '{param}': {error['msg']} (got {_preview(error['input'])})."
    if error["type"] == "missing":
        return param, f"Missing required parameter: '{param}'."
    if error["type"] == "extra_forbidden":
        return param, f"Unrecognized parameter: '{param}'."
    message = error["msg"].removeprefix("Value error, ")
    return param, f"Invalid '{param}': {message[0].lower()}{message[1:]} (got {_preview(error['input'])})."


def _path(loc: list[Any]) -> str:
    """`messages[2].content[0].text` from ('messages', 2, 'content', 0, 'text')."""
    if not loc:
        return "body"
    return str(loc[0]) + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc[1:])


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
