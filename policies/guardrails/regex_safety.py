"""Regex analysis: refuse nested quantifiers, size stream hold-back windows, and prefilter by words.

Python's `re` backtracks; a pattern like ``(a+)+b`` takes exponential time on ``aaaa…c``. A nested
unbounded-or-large repeat is the shape behind catastrophic backtracking, so config loading refuses
it (possessive ``++`` and atomic groups ``(?>…)`` do not backtrack and are allowed). The maximal
match width tells the stream guard how many trailing characters a match could still extend into.
The whole words every match must hold (`required_words`) let a check skip a pattern, exactly, on a
text that has none of them (one set lookup instead of a regex run). All three read the standard
library's own regex parser (``re._parser``), the one `re.compile` uses.
"""

from __future__ import annotations

import importlib
import re
import string
import threading
from collections.abc import Iterable, Sequence
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


# -- whole words every match holds ------------------------------------------------------------------
# A *word* is what `Folded.words` splits a text into: a maximal run of ASCII letters, digits and
# underscores; every other character (non-ASCII ones included) separates words. A string the pattern
# can only consume as such a run, with a separator (or the text's edge) proven on both sides, is a
# whole word of every text it matches in.

_WORD = frozenset(string.ascii_letters + string.digits + "_")
_MAX_STRINGS = 64  # exact strings of one part kept, at most: more proves nothing cheaply
_ZERO_WIDTH = frozenset({"AT", "ASSERT", "ASSERT_NOT"})
_LEFT_EDGES = frozenset({"AT_BOUNDARY", "AT_BEGINNING", "AT_BEGINNING_STRING"})
_RIGHT_EDGES = frozenset({"AT_BOUNDARY", "AT_END", "AT_END_STRING"})
_SEPARATOR_CLASSES = frozenset({"CATEGORY_NOT_WORD", "CATEGORY_SPACE", "CATEGORY_LINEBREAK"})
_REPEAT_NODES = _REPEATS | {"POSSESSIVE_REPEAT"}
_NESTING = _REPEAT_NODES | {"SUBPATTERN", "BRANCH"}  # parts with parts of their own
Node = tuple[Any, Any]
# One analysis at a time; within it, each part's exact strings, least width and whether it is word-only,
# by the part's id (the parse tree holds every part while the analysis runs, and the memo is emptied
# after it, so no id is ever reused within it).
_ANALYSIS = threading.Lock()
_KNOWN: dict[tuple[int, int], Any] = {}


def required_words(pattern: re.Pattern[str]) -> tuple[frozenset[bytes], ...]:
    """Sets of words such that every match of `pattern` holds, as whole words, one word of each set
    (most selective first); empty when nothing is proven (case-insensitive patterns are not read)."""
    if pattern.flags & (re.IGNORECASE | re.LOCALE):
        return ()
    with _ANALYSIS:
        try:
            tree = _parser().parse(pattern.pattern, pattern.flags)
            found = _requirements(list(tree.data), False, False)
        except (ImportError, AttributeError, TypeError, ValueError, IndexError):  # parser internals moved
            return ()
        finally:
            _KNOWN.clear()
    unique = {frozenset(word.encode() for word in words) for words in found}
    return tuple(sorted(unique, key=_selectivity))


def _selectivity(words: Iterable[str | bytes]) -> tuple[int, int]:
    listed = list(words)
    return -min(len(word) for word in listed), len(listed)  # long words are rare, few are rarer


def _seq(value: Any) -> list[Node]:
    return list(value.data) if hasattr(value, "data") else list(value)


def _requirements(items: Sequence[Node], left: bool, right: bool) -> list[frozenset[str]]:
    """The requirement sets of a sequence whose left (right) neighbour is a separator when `left`
    (`right`): runs of word-only parts with separators proven around them, then those of its groups,
    branches (one set per alternative, united) and repeats that must match at least once."""
    found: list[frozenset[str]] = []
    start = 0
    while start < len(items):
        if not _word_part(items[start]):
            start += 1
            continue
        end = start
        strings: frozenset[str] | None = frozenset({""})  # the run's strings; None once too many
        while end < len(items) and _word_part(items[end]):
            strings = _product(strings, _exact(items[end]))
            end += 1
        if strings and "" not in strings and _left_edge(items, start, left) and _right_edge(items, end - 1, right):
            found.append(strings)
        start = end
    for at, node in enumerate(items):
        op, arg = node
        name = str(op)
        if name not in _NESTING or _min_width(node) == 0:
            continue  # a character proves nothing more; an optional part nothing
        inner_left, inner_right = _left_edge(items, at, left), _right_edge(items, at, right)
        if name == "SUBPATTERN" and not arg[1] & (re.IGNORECASE | re.LOCALE):
            found += _requirements(_seq(arg[3]), inner_left, inner_right)
        elif name == "BRANCH":
            chosen = [
                min(sets, key=_selectivity) if sets else None
                for sets in (_requirements(_seq(alternative), inner_left, inner_right) for alternative in arg[1])
            ]
            if all(chosen):
                found.append(frozenset().union(*(words for words in chosen if words)))
        elif name in _REPEAT_NODES:  # its first iteration, followed by the next one or by what follows
            body = _seq(arg[2])
            found += _requirements(body, inner_left, inner_right and (arg[1] == 1 or _edge(body, last=False)))
    return [words for words in found if len(words) <= _MAX_STRINGS]


def _word_part(node: Node) -> bool:
    """A part that consumes only ASCII word characters, from a finite set of strings."""
    key = (2, id(node))
    if key not in _KNOWN:
        strings = None if str(node[0]) in _ZERO_WIDTH else _exact(node)
        _KNOWN[key] = strings is not None and all(_WORD.issuperset(text) for text in strings)
    word: bool = _KNOWN[key]
    return word


def _product(heads: frozenset[str] | None, tails: frozenset[str] | None) -> frozenset[str] | None:
    if heads is None or tails is None or len(heads) * len(tails) > _MAX_STRINGS:
        return None
    return frozenset(head + tail for head in heads for tail in tails)


def _exact(node: Node) -> frozenset[str] | None:
    """Every string the part can consume, when they are few; None otherwise."""
    key = (0, id(node))
    if key not in _KNOWN:
        _KNOWN[key] = _exact_of(node)
    found: frozenset[str] | None = _KNOWN[key]
    return found


def _exact_of(node: Node) -> frozenset[str] | None:
    op, arg = node
    name = str(op)
    if name == "LITERAL":
        return frozenset({chr(arg)})
    if name == "IN":
        members = list(arg)
        if all(str(kind) == "LITERAL" for kind, _ in members) and len(members) <= 8:
            return frozenset(chr(code) for _, code in members)
        return None
    if name in _ZERO_WIDTH:
        return frozenset({""})
    if name == "SUBPATTERN":
        return None if arg[1] & (re.IGNORECASE | re.LOCALE) else _exact_seq(_seq(arg[3]))
    if name == "BRANCH":
        options = [_exact_seq(_seq(alternative)) for alternative in arg[1]]
        if any(option is None for option in options):
            return None
        union = frozenset().union(*(option for option in options if option is not None))
        return union if len(union) <= _MAX_STRINGS else None
    if name in _REPEAT_NODES and arg[1] <= 4:
        body = _exact_seq(_seq(arg[2]))
        strings: frozenset[str] | None = frozenset({""})
        result: set[str] = {""} if arg[0] == 0 else set()
        for count in range(1, arg[1] + 1):
            strings = _product(strings, body)
            if strings is None:
                return None
            if count >= arg[0]:
                result |= strings
        return frozenset(result) if len(result) <= _MAX_STRINGS else None
    return None


def _exact_seq(items: Sequence[Node]) -> frozenset[str] | None:
    strings: frozenset[str] | None = frozenset({""})
    for node in items:
        strings = _product(strings, _exact(node))
    return strings


def _min_width(node: Node) -> int:
    key = (1, id(node))
    if key not in _KNOWN:
        _KNOWN[key] = _min_width_of(node)
    width: int = _KNOWN[key]
    return width


def _min_width_of(node: Node) -> int:
    op, arg = node
    name = str(op)
    if name in {"LITERAL", "NOT_LITERAL", "IN", "ANY"}:
        return 1
    if name == "SUBPATTERN":
        return sum(_min_width(item) for item in _seq(arg[3]))
    if name == "ATOMIC_GROUP":
        return sum(_min_width(item) for item in _seq(arg))
    if name == "BRANCH":
        return min(sum(_min_width(item) for item in _seq(alternative)) for alternative in arg[1])
    if name in _REPEAT_NODES:
        return int(arg[0]) * sum(_min_width(item) for item in _seq(arg[2]))
    return 0  # zero-width, a back-reference, anything unknown: as if it could be empty


def _separators(node: Node) -> bool:
    """A one-character part that matches separators only."""
    op, arg = node
    name = str(op)
    if name == "LITERAL":
        return chr(arg) not in _WORD
    if name != "IN":
        return False
    members = list(arg)
    if members and str(members[0][0]) == "NEGATE":  # [^\w…]: nothing of \w
        return any(str(kind) == "CATEGORY" and str(value) == "CATEGORY_WORD" for kind, value in members[1:])
    return bool(members) and all(_separator_member(str(kind), value) for kind, value in members)


def _separator_member(kind: str, value: Any) -> bool:
    if kind == "LITERAL":
        return chr(value) not in _WORD
    if kind == "CATEGORY":
        return str(value) in _SEPARATOR_CLASSES
    if kind == "RANGE":
        return value[0] > 127 or all(chr(code) not in _WORD for code in range(value[0], min(value[1], 127) + 1))
    return False


def _edge(items: Sequence[Node], *, last: bool) -> bool:
    """Whenever the sequence consumes a character, its last (first) one is a separator."""
    for node in reversed(items) if last else items:
        if not _node_edge(node, last):
            return False
        if _min_width(node) > 0:
            return True
    return True


def _node_edge(node: Node, last: bool) -> bool:
    op, arg = node
    name = str(op)
    if name in {"LITERAL", "IN"}:
        return _separators(node)
    if name in _ZERO_WIDTH:
        return True  # consumes nothing
    if name == "SUBPATTERN":
        return _edge(_seq(arg[3]), last=last)
    if name == "BRANCH":
        return all(_edge(_seq(alternative), last=last) for alternative in arg[1])
    if name in _REPEAT_NODES:
        return _edge(_seq(arg[2]), last=last)
    return False


def _word_test(node: Node, direction: int) -> bool:
    """A negative look-around of one word character: before (direction -1) or after (1)."""
    op, arg = node
    if str(op) != "ASSERT_NOT" or arg[0] != direction:
        return False
    inner = _seq(arg[1])
    return len(inner) == 1 and str(inner[0][0]) == "IN" and [str(v) for _, v in inner[0][1]] == ["CATEGORY_WORD"]


def _left_edge(items: Sequence[Node], at: int, context: bool) -> bool:
    """The character before part `at` is a separator (or the text's start), whatever matched."""
    for node in reversed(items[:at]):
        name = str(node[0])
        if (name == "AT" and str(node[1]) in _LEFT_EDGES) or _word_test(node, -1):
            return True
        if name in _ZERO_WIDTH:
            continue
        if not _node_edge(node, last=True):
            return False
        if _min_width(node) > 0:
            return True
    return context


def _right_edge(items: Sequence[Node], at: int, context: bool) -> bool:
    """The character after part `at` is a separator (or the text's end), whatever matched."""
    for node in items[at + 1 :]:
        name = str(node[0])
        if (name == "AT" and str(node[1]) in _RIGHT_EDGES) or _word_test(node, 1):
            return True
        if name in _ZERO_WIDTH:
            continue
        if not _node_edge(node, last=False):
            return False
        if _min_width(node) > 0:
            return True
    return context
