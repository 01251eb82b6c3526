"""JSON texts (a tool call's arguments): checked as the value a JSON parser reads, redacted so that
they stay JSON.

- `Unescaper` spells each ``\\uXXXX`` escape (a surrogate pair included) and ``\\/`` as the character
  it stands for, unless a JSON string must keep it escaped (``"``, ``\\``, control characters, lone
  surrogates): the same JSON value, in which the checks read ``"\\u0031\\u0032\\u0033-45-6789"`` as
  the SSN it is. It works incrementally: an escape split across stream deltas waits for its end.
- `check_view` is what pattern checks read of such a text: character for character (offsets
  stay), each escape JSON must keep read as the character it stands for, padded with spaces
  (``\\n536-22-8479`` is a line break before an SSN, not the word ``n536``).
- `JsonRedactor` follows where strings begin and end (incrementally too, for streams) and places
  each redaction so that the text stays JSON: inside a string, the placeholder escaped; over a bare
  value (a number), the whole value becomes the placeholder as a string. A match across a string's quotes
  or the structure cannot be redacted as JSON: `redact` says None and the caller withholds instead.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import orjson

_HEX = frozenset("0123456789abcdefABCDEF")
_NOT_BARE = frozenset(' \t\n\r{}[],:"')  # what ends a bare value (a number, true, false, null)
_SPECIAL = re.compile(r'["\\]')
_QUOTE_ONLY = re.compile('"')
_HIGH = range(0xD800, 0xDC00)
_LOW = range(0xDC00, 0xE000)
# Character classes of a JSON text, one per character.
_OUT, _QUOTE, _CHAR, _ESCAPE_START, _ESCAPE_REST = range(5)


_KEPT_ESCAPE = re.compile(r"\\(?:u[0-9a-fA-F]{4}|[\s\S])")


def check_view(text: str) -> str:
    """An unescaped JSON text as pattern checks read it, of the same length (see above)."""
    return _KEPT_ESCAPE.sub(_read_escape, text) if "\\" in text else text


def _read_escape(match: re.Match[str]) -> str:
    escape = match.group()
    char = chr(int(escape[2:], 16)) if escape[1] == "u" else escape[1] if escape[1] in '"\\/' else " "
    return " " * (len(escape) - 1) + (char if char.isprintable() and not 0xD800 <= ord(char) < 0xE000 else " ")


def is_json(text: str) -> bool:
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    return True


def unescape(text: str) -> str:
    """The whole `text` through an `Unescaper`."""
    return Unescaper().feed(text, final=True)


class Unescaper:
    def __init__(self) -> None:
        self._tail = ""  # an escape that may still be completed by the next delta

    def feed(self, delta: str, *, final: bool = False) -> str:
        text, self._tail = self._tail + delta, ""
        out: list[str] = []
        at = 0
        while (slash := text.find("\\", at)) >= 0:
            out.append(text[at:slash])
            size, char = _escape(text, slash, final)
            if size == 0:  # incomplete: wait for the rest
                self._tail = text[slash:]
                return "".join(out)
            out.append(char if char is not None else text[slash : slash + size])
            at = slash + size
        out.append(text[at:])
        return "".join(out)


def _escape(text: str, at: int, final: bool) -> tuple[int, str | None]:
    """(length of the escape at `at`, the character to write or None to keep it); (0, None): the
    text ends before the escape does."""
    rest = text[at + 1 : at + 12]
    if not rest:
        return (1, None) if final else (0, None)
    if rest[0] == "/":
        return 2, "/"
    if rest[0] != "u":
        return 2, None
    digits = rest[1:5]
    if not _is_hex_prefix(digits):
        return 2, None
    if len(digits) < 4:
        return (len(digits) + 2, None) if final else (0, None)
    code = int(digits, 16)
    if code in _HIGH:
        low = rest[5:11]
        if len(low) < 6 and not final and _is_escape_prefix(low):
            return 0, None
        if len(low) == 6 and low.startswith("\\u") and _is_hex_prefix(low[2:]) and int(low[2:], 16) in _LOW:
            return 12, chr(0x10000 + ((code - 0xD800) << 10) + int(low[2:], 16) - 0xDC00)
        return 6, None  # a lone surrogate is no character: keep its escape
    if code < 0x20 or code in _LOW or chr(code) in '"\\':
        return 6, None
    return 6, chr(code)


def _is_hex_prefix(digits: str) -> bool:
    return all(c in _HEX for c in digits)


def _is_escape_prefix(text: str) -> bool:
    return "\\u".startswith(text[:2]) and _is_hex_prefix(text[2:])


class JsonRedactor:
    """Redacts a JSON text given in consecutive segments (the whole text, or a stream's releases)."""

    def __init__(self) -> None:
        self._in_string = False
        self._escape_left = 0  # characters of an escape still to come (-1: the one after the backslash)
        self._number = False  # the text so far ends inside a bare value

    def redact(self, segment: str, spans: Sequence[tuple[int, int, str]], *, final: bool) -> str | None:
        """`segment` (the next part of the text) with `spans` (sorted, non-overlapping, relative to
        it) replaced by their placeholders as JSON allows; None when one cannot be. Advances past it."""
        number = self._number
        classes = bytearray(len(segment)) if spans else None
        self._scan(segment, classes)
        if classes is None:
            return segment
        ends = (number, not final and self._escape_left != 0, not final and self._number)
        out: list[str] = []
        at = 0
        for start, end, placeholder in spans:
            placed = _place(segment, classes, start, end, ends)
            if placed is None or placed[0] < at:
                return None
            start, end, quoted = placed
            encoded = orjson.dumps(placeholder).decode()
            out += [segment[at:start], encoded if quoted else encoded[1:-1]]
            at = end
        out.append(segment[at:])
        return "".join(out)

    def _scan(self, segment: str, classes: bytearray | None) -> None:
        """Follow `segment` (jumping between quotes and backslashes); `classes`: fill with each
        character's class."""
        at, size = 0, len(segment)
        while at < size:
            if self._escape_left:
                char = segment[at]
                if self._escape_left == -1:
                    self._escape_left = 4 if char == "u" else 0
                else:
                    self._escape_left = self._escape_left - 1 if char in _HEX else 0
                if classes is not None:
                    classes[at] = _ESCAPE_REST
                at += 1
                continue
            found = (_SPECIAL if self._in_string else _QUOTE_ONLY).search(segment, at)
            stop = found.start() if found is not None else size
            if classes is not None and stop > at:
                classes[at:stop] = bytes([_CHAR if self._in_string else _OUT]) * (stop - at)
            if found is None:
                break
            if segment[stop] == "\\":
                self._escape_left = -1
            else:
                self._in_string = not self._in_string
            if classes is not None:
                classes[stop] = _ESCAPE_START if self._escape_left else _QUOTE
            at = stop + 1
        if segment:
            self._number = not self._in_string and not self._escape_left and segment[-1] not in _NOT_BARE


def _place(
    segment: str, classes: bytearray, start: int, end: int, ends: tuple[bool, bool, bool]
) -> tuple[int, int, bool] | None:
    """Where a redaction of [start, end) goes, and whether its placeholder needs quotes. `ends`: the
    segment begins inside a number; it ends inside an escape; it ends inside a number (that goes on)."""
    number_before, open_escape, number_after = ends
    inside = classes[start:end]
    if all(c in (_CHAR, _ESCAPE_START, _ESCAPE_REST) for c in inside):
        while start > 0 and classes[start] == _ESCAPE_REST:  # never half an escape
            start -= 1
        while end < len(segment) and classes[end] == _ESCAPE_REST:
            end += 1
        if classes[start] == _ESCAPE_REST or (end == len(segment) and open_escape):
            return None  # the escape began in an earlier segment, or may go on in the next
        return start, end, False
    if all(c == _OUT for c in inside) and not any(segment[i] in _NOT_BARE for i in range(start, end)):
        while start > 0 and classes[start - 1] == _OUT and segment[start - 1] not in _NOT_BARE:
            start -= 1
        while end < len(segment) and classes[end] == _OUT and segment[end] not in _NOT_BARE:
            end += 1
        if (start == 0 and number_before) or (end == len(segment) and number_after):
            return None  # the number may go on beyond this segment
        return start, end, True
    return None
