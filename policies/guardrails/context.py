"""The grounding document: the request's `context` field (`enkrypt_context` accepted), never sent upstream.

`pop_context` removes both keys from a raw body (or from a parsed request's ``model_extra``, which
is where `CompletionRequest` keeps unknown fields), so the upstream never sees them. A string or a
list of strings (joined by blank lines) is accepted; anything else is a 400 naming the field.
"""

from __future__ import annotations

from typing import Any

from gateway.api.errors import InvalidRequest

CONTEXT_KEYS = ("context", "enkrypt_context")


def pop_context(body: dict[str, Any] | None) -> str | None:
    if not body or body.keys().isdisjoint(CONTEXT_KEYS):  # the usual body: nothing to take out
        return None
    found: list[tuple[str, Any]] = [(key, body.pop(key)) for key in CONTEXT_KEYS if key in body]
    for key, value in found:
        if value is None:
            continue
        if isinstance(value, str):
            return value
        if isinstance(value, list) and all(isinstance(item, str) for item in value):
            return "\n\n".join(value)
        raise InvalidRequest(f"'{key}' must be a string or an array of strings", param=key, code="invalid_value")
    return None
