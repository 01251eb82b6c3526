""" "Did you mean …?" for a config file's typos: the settings a model accepts at any nesting level
(read from the models themselves, so a setting added anywhere is known at once), and the nearest of
a set of names to a misspelt one."""

from __future__ import annotations

import difflib
import types
from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel

Location = Sequence[int | str]


def nearest(word: str, choices: Iterable[str]) -> str | None:
    """The choice `word` most looks like a misspelling of; None when none is close."""
    found = difflib.get_close_matches(word, sorted(set(choices)), n=1, cutoff=0.6)
    if found:
        return found[0]
    lowered = {choice.lower(): choice for choice in choices}  # `Port` for `port`
    return lowered.get(word.lower())


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`; did you mean 'x'?`, or nothing when no choice is close."""
    found = nearest(word, choices)
    return f"; did you mean {found!r}?" if found is not None and found != word else ""


def settings_at(model: type[BaseModel], location: Location) -> frozenset[str]:
    """The setting names the model accepts at `location` (a validation error's `loc` without its
    last part); empty when the location cannot be followed."""
    return frozenset(_settings(model, tuple(location)))


def _settings(annotation: Any, location: tuple[int | str, ...]) -> set[str]:
    annotation = _unwrapped(annotation)
    origin = get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _model_settings(annotation, location)
    if origin in (Union, types.UnionType):
        return _union_settings([m for m in get_args(annotation) if m is not type(None)], location)
    if not location:
        return set()
    arguments = get_args(annotation)
    if origin in (list, tuple, set, frozenset) or (isinstance(origin, type) and issubclass(origin, Sequence)):
        return _settings(arguments[0], location[1:]) if arguments else set()
    if origin is dict or (isinstance(origin, type) and issubclass(origin, Mapping)):
        return _settings(arguments[1], location[1:]) if len(arguments) == 2 else set()
    return set()


def _model_settings(model: type[BaseModel], location: tuple[int | str, ...]) -> set[str]:
    by_name = {field.alias or name: field for name, field in model.model_fields.items()}
    if not location:
        return set(by_name)
    field = by_name.get(str(location[0]))
    return _settings(field.annotation, location[1:]) if field is not None else set()


def _union_settings(members: list[Any], location: tuple[int | str, ...]) -> set[str]:
    """A union's member is named in the location by its tag (`pii` for `check: pii`) or its class
    name; a nullable field's is not named at all."""
    if location and isinstance(location[0], str):
        named = [m for m in members if _names_member(m, location[0])]
        if named:
            return set().union(*(_settings(m, location[1:]) for m in named))
    found: set[str] = set()
    for member in members:
        found |= _settings(member, location)
    return found


def _names_member(member: Any, part: str) -> bool:
    member = _unwrapped(member)
    if not (isinstance(member, type) and issubclass(member, BaseModel)):
        return False
    if member.__name__ == part:
        return True
    return any(
        get_origin(field.annotation) is Literal and part in get_args(field.annotation)
        for field in member.model_fields.values()
    )


def _unwrapped(annotation: Any) -> Any:
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation
