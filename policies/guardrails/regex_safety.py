"""Regex vetting for operator patterns: refuse nested quantifiers, and size stream hold-back windows.

Python's `re` backtracks; a pattern like ``(a+)+b`` takes exponential time on ``aaaa…c``. A nested
unbounded-or-large repeat is the shape behind catastrophic backtracking, so config loading refuses
it (possessive ``++`` and atomic groups ``(?>…)`` do not backtrack and are allowed). The maximal
match width tells the stream guard how many trailing characters a match could still extend into.
Both read the standard library's own regex parser (``re._parser``), the one `re.compile` uses.
"""

from __future__ import annotations

import importlib
from typing import Any

_REPEATS = {"MAX_REPEAT", "MIN_REPEAT"}
_LARGE = 16  # a repeat allowing more than this many iterations counts as "large"


def _parser() -> Any:
    return importlib.import_module("re._parser")


def _children(value: Any) -> list[Any]:
    """Sub-patterns inside one node's argument (lists, tuples, SubPatterns), flattened."""
    if hasattr(value, "data"):
        return [value]
    if isinstance(value, list | tuple):
        return [child for item in value for child in _children(item)]
    return []


def _has_repeat(subpattern: Any, inside: bool) -> bool:
    for op, arg in subpattern.data:
        name = str(op)
        if name in _REPEATS and arg[1] > _LARGE:
            if inside:
                return True
            if any(_has_repeat(child, True) for child in _children(arg[2])):
                return True
            continue
        if name in {"POSSESSIVE_REPEAT", "ATOMIC_GROUP"}:
            continue
        if any(_has_repeat(child, inside) for child in _children(arg)):
            return True
    return False


def backtracking_risk(pattern: str) -> bool:
    """True when a large repeat contains another one, e.g. ``(a+)+`` or ``(\\w+\\s?)*``."""
    try:
        return _has_repeat(_parser().parse(pattern), False)
    except (ImportError, AttributeError):  # parser internals moved: compile-time vetting is skipped
        return False


def max_width(pattern: str) -> int | None:
    """The longest match the pattern allows, or None when unbounded."""
    try:
        parser = _parser()
        width: int = parser.parse(pattern).getwidth()[1]
        return None if width >= parser.MAXREPEAT else width
    except (ImportError, AttributeError):
        return None
