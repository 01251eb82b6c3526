"""A validation error of config.yaml as the lines an operator reads: each problem named by its YAML
path, a misspelt setting, choice or kind with the one meant, and no secret or environment value."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from gateway.config.settings import SECRET_FIELDS
from gateway.config.suggestions import did_you_mean, nearest, settings_at

# (already reported as an unset variable, its value came from the environment) for a YAML path.
Hidden = Callable[[str], tuple[bool, bool]]

# Errors whose message already quotes what the file gave.
_NAMES_THE_VALUE = frozenset({"extra_forbidden", "union_tag_invalid"})
_QUOTED = re.compile(r"'([^']*)'")
_REFERENCE = "see docs/reference/configuration.md"


def describe(
    exc: ValidationError, prefix: str, model: type[BaseModel], *, hidden: Hidden, also: frozenset[str] = frozenset()
) -> list[str]:
    """One line per problem (once each), `prefix` before every path; `also`: settings the model is
    given apart (a provider block's `type`)."""
    problems: dict[str, None] = {}  # ordered, and a typo pydantic reports twice is one line
    for error in exc.errors():
        loc, message = _located(error, model, also)
        path = _path(prefix, loc)
        missing, from_env = hidden(path)
        if missing:
            continue  # already reported as the unset variable it is
        value = error.get("input")
        last = str(loc[-1]) if loc else ""
        shown = last not in SECRET_FIELDS and not from_env and error["type"] not in _NAMES_THE_VALUE
        if shown and isinstance(value, (str, int, float)):
            message += f" (got {value!r})"
        problems[f"{path or '(top level)'}: {message}"] = None
    return list(problems)


def _located(error: Any, model: type[BaseModel], also: frozenset[str]) -> tuple[Sequence[int | str], str]:
    """Where the problem is and what to say. A required setting that is missing beside a misspelling
    of it is the misspelling's problem (a block that allows other keys, such as `provider:`, or the
    `check:` of a guardrail, would otherwise only say 'required')."""
    kind, ctx, loc = error["type"], error.get("ctx") or {}, tuple(error["loc"])
    if kind == "extra_forbidden":
        return loc, _unknown_setting(str(loc[-1]), settings_at(model, loc[:-1]) | also)
    if kind in ("missing", "union_tag_not_found"):
        wanted = str(ctx.get("discriminator", "")).strip("'") if kind == "union_tag_not_found" else str(loc[-1])
        parent = loc if kind == "union_tag_not_found" else loc[:-1]
        given, accepted = error.get("input"), settings_at(model, parent) | also
        if isinstance(given, dict):
            for key in given:
                if isinstance(key, str) and key not in accepted and nearest(key, [wanted]) == wanted:
                    return (*parent, key), _unknown_setting(key, [wanted])
        if kind == "union_tag_not_found":
            return loc, f"missing setting {wanted!r}, which says what kind of entry this is ({_REFERENCE})"
    if kind == "union_tag_invalid":
        discriminator = str(ctx.get("discriminator", "type")).strip("'")
        expected, tag = _QUOTED.findall(str(ctx.get("expected_tags", ""))), str(ctx.get("tag", ""))
        return loc, f"unknown {discriminator} {tag!r}{did_you_mean(tag, expected)} (known: {', '.join(expected)})"
    message = _plain(error)
    value = error.get("input")
    if kind in ("literal_error", "enum") and isinstance(value, str):
        message += did_you_mean(value, _QUOTED.findall(str(ctx.get("expected", ""))))
    return loc, message


def _unknown_setting(name: str, accepted: Sequence[str] | frozenset[str]) -> str:
    hint = did_you_mean(name, accepted)
    return f"unknown setting{hint} ({'' if hint else 'check the spelling; '}{_REFERENCE})"


def _plain(error: Any) -> str:
    message: str = error["msg"].removeprefix("Value error, ")
    return message


def _path(prefix: str, loc: Sequence[int | str]) -> str:
    path = prefix
    for part in loc:
        path = f"{path}[{part}]" if isinstance(part, int) else (f"{path}.{part}" if path else str(part))
    return path
