"""Byte and number carriers: runs of one text that another encoding of bytes or characters would turn
into text, decoded as candidates (`Decoding`); `decoded` keeps those that read as text.

- ``base32`` (one case, ``A``-``Z`` and ``2``-``7``) and ``base85`` (Ascii85 between ``<~ ~>``, or an
  RFC 1924 run with its punctuation);
- ``binary``: eight-bit groups, spaced or in one run;
- ``charcodes``: decimal code points (``73 103 110``, ``chr(73)+chr(103)``), octal (``\\151``),
  HTML character references (``&#105;``, ``&#x69;``) and ``\\u`` escapes;
- ``percent``: percent-encoding (``%69%67``, ``ignore%20all``) and quoted-printable (``=69=67``).

Each starts from a C-speed count or ``find`` on the text's byte view, so that a text without the
carrier's characters pays one pass; matches are bounded in number and size (`MAX_RUNS`, `MAX_CHARS`).
"""

from __future__ import annotations

import base64
import binascii
import html
import quopri
import re
import urllib.parse
from collections.abc import Callable
from typing import NamedTuple

from policies.guardrails.normalize import Folded

MAX_RUNS = 8  # candidates per finder and text
MAX_CHARS = 8192  # characters of one carrier read at most
MAX_TRIES = 512  # places a finder looks at, at most


class Decoding(NamedTuple):
    kind: str
    text: str  # the decoded text, not folded
    start: int  # the carrier's original [start, end)
    end: int
    whole: bool = False  # the whole text read another way (a cipher): not a located carrier


def _marks(alphabet: str, mark: int = 97) -> bytes:
    return bytes(mark if chr(i) in alphabet else 32 for i in range(256))


_B32_VIEW = _marks("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz234567=")
_B32_RUN = b"a" * 16
_B85_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~"
_B85_VIEW = _marks(_B85_ALPHABET)
_B85_RUN = b"a" * 24
_A85 = re.compile(r"<~([!-u\sz]{10,}?)~>")
_BITS_VIEW = bytes(98 if i in (48, 49) else 32 if i in (32, 44) else 120 for i in range(256))
_BINARY = re.compile(r"(?:[01]{8}[ ,]{0,2}){6,}")
_NUMBERS = re.compile(
    r"(?:(?:chr|char|unichr|fromcharcode)\W{1,2})?\d{2,7}(?:(?:[\s,;:+|/]{1,3}|\W{1,4}(?:chr|char|unichr)\W{1,2})"
    r"\d{2,7}){7,}"
)
NUMBER_VIEW = (
    bytes(100 if chr(i).isdigit() else 32 if chr(i) in " ,;:+|/\t\n" else 120 for i in range(128)) + b"x" * 128
)
_OCTAL = re.compile(r"(?:\\[0-3][0-7]{2}){6,}")
_ENTITIES = re.compile(r"(?:&#(?:x[0-9a-f]{1,6}|\d{1,7});?[^&\s]{0,2}){4,}")
_ESCAPES = re.compile(r"(?:\\u(?:[0-9a-f]{4}|\{[0-9a-f]{1,6}\})[^\\\s]{0,2}){4,}")
_ESCAPE_VIEW = (
    bytes(104 if chr(i) in "0123456789abcdefABCDEF" else 32 if chr(i).isspace() else i for i in range(128)) + b"?" * 128
)
MIN_ESCAPES = 4


def base32(folded: Folded) -> list[Decoding]:
    source = folded.source
    if not source.isascii():
        source = source.encode("ascii", "replace").decode()
    runs = source.encode().translate(_B32_VIEW)
    found: list[Decoding] = []
    at = runs.find(_B32_RUN)
    while at != -1 and len(found) < MAX_RUNS:
        end = runs.find(b" ", at)
        end = len(runs) if end == -1 else end
        body = source[at:end].rstrip("=")
        if (body.isupper() or body.islower()) and len(body) % 8 in (0, 2, 4, 5, 7):
            try:
                raw = base64.b32decode(body[:MAX_CHARS] + "=" * (-len(body) % 8), casefold=True)
            except (binascii.Error, ValueError):
                raw = b""
            text = _utf8(raw)
            if text:
                found.append(Decoding("base32", text, at, end))
        at = runs.find(_B32_RUN, end)
    return found


def base85(folded: Folded) -> list[Decoding]:
    source = folded.source
    found: list[Decoding] = []
    if "<~" in source:
        for match in _A85.finditer(source):
            try:
                text = _utf8(base64.a85decode(match.group(1)[:MAX_CHARS].encode()))
            except ValueError:
                continue
            if text:
                found.append(Decoding("base85", text, *match.span()))
    if not source.isascii():
        return found
    runs = source.encode().translate(_B85_VIEW)
    at = runs.find(_B85_RUN)
    while at != -1 and len(found) < MAX_RUNS:
        end = runs.find(b" ", at)
        end = len(runs) if end == -1 else end
        run = source[at:end]
        if sum(not c.isalnum() for c in run) >= 2 and not run.startswith("<~"):  # alphanumeric runs are base64's
            try:
                text = _utf8(base64.b85decode(run[:MAX_CHARS].encode()))
            except ValueError:
                text = ""
            if text:
                found.append(Decoding("base85", text, at, end))
        at = runs.find(_B85_RUN, end)
    return found


def binary(folded: Folded) -> list[Decoding]:
    if folded.ascii.count(b"0") < 16:  # eight-bit groups of text hold zeros and ones alike
        return []
    view = folded.ascii.translate(_BITS_VIEW)
    if view.find(b"bbbbbbbb bbbbbbbb bbbbbbbb") == -1 and view.find(b"b" * 48) == -1:
        return []
    found: list[Decoding] = []
    for match in _BINARY.finditer(folded.text):
        bits = re.sub(r"[^01]", "", match.group())[: MAX_CHARS * 8]
        raw = int(bits[: len(bits) - len(bits) % 8], 2).to_bytes(len(bits) // 8, "big")
        text = _utf8(raw)
        if text:
            found.append(Decoding("binary", text, *folded.span(*match.span())))
        if len(found) >= MAX_RUNS:
            break
    return found


def charcodes(folded: Folded) -> list[Decoding]:
    """Decimal or octal code points, HTML character references, ``\\u`` escapes."""
    text, view = folded.text, folded.ascii
    found: list[tuple[str, int, int]] = []
    if view.find(b"&") != -1 and view.count(b"&#") >= 4:
        found += _runs(folded, _ENTITIES, html.unescape)
    if view.count(b"\\") >= 4:
        if view.count(b"\\u") >= 4:
            found += _runs(folded, _ESCAPES, _unescape)
        if sum(view.count(b"\\" + digit) for digit in (b"0", b"1", b"2", b"3")) >= 6:
            found += _runs(folded, _OCTAL, lambda run: _utf8(bytes(int(code, 8) for code in run.split("\\")[1:])))
    numbers = view.translate(NUMBER_VIEW)  # digits "d", separators " ": eight numbers in a row hold seven "d d"
    if numbers.count(b"d d") + numbers.count(b"d  d") >= 7 or "chr" in text:
        found += _number_runs(folded, numbers)
    return [Decoding("charcodes", decoded, start, end) for decoded, start, end in found[:MAX_RUNS]]


def percent(folded: Folded) -> list[Decoding]:
    """Percent-encoding (``%69%67``, ``ignore%20all``) and quoted-printable (``=69=67``): each
    whitespace-free token holding `MIN_ESCAPES` escapes, decoded."""
    view = folded.ascii
    if view.find(b"%") == -1 and view.find(b"=") == -1:  # memchr: most texts stop here
        return []
    marks = view.translate(_ESCAPE_VIEW)  # hex digits "h", whitespace " "
    found: list[tuple[str, int, int]] = []
    for mark, decode in ((b"%hh", _unquote), (b"=hh", _unquote_printable)):
        if marks.count(mark) >= MIN_ESCAPES:
            found += _tokens_with(folded, marks, mark, decode)
    return [Decoding("percent", text, start, end) for text, start, end in found[:MAX_RUNS]]


def _tokens_with(folded: Folded, marks: bytes, mark: bytes, decode: Callable[[str], str]) -> list[tuple[str, int, int]]:
    """The decodings of the whitespace-free tokens of `folded` in which `mark` occurs `MIN_ESCAPES` times."""
    found: list[tuple[str, int, int]] = []
    at = marks.find(mark)
    for _ in range(MAX_TRIES):
        if at == -1 or len(found) >= MAX_RUNS:
            break
        start = marks.rfind(b" ", 0, at) + 1
        end = marks.find(b" ", at)
        end = len(marks) if end == -1 else end
        if marks.count(mark, start, end) >= MIN_ESCAPES:
            token = folded.text[start : min(end, start + MAX_CHARS)]
            text = decode(token)
            if text and text != token:
                found.append((text, *folded.span(start, end)))
        at = marks.find(mark, end)
    return found


def _number_runs(folded: Folded, numbers: bytes) -> list[tuple[str, int, int]]:
    """Runs of code points, tried only where seven number pairs lie within 96 characters (or at ``chr(``)."""
    text = folded.text
    pairs = sorted(_places(numbers, b"d d") + _places(numbers, b"d  d"))
    starts = [pairs[i] for i in range(len(pairs) - 6) if pairs[i + 6] - pairs[i] <= 96]
    starts += _places(folded.ascii, b"chr") if "chr" in text else []
    found: list[tuple[str, int, int]] = []
    done = 0
    for at in sorted(starts):
        if at < done or len(found) >= MAX_RUNS:
            continue
        while at > done and numbers[at - 1] == 100:  # back to the number's first digit ("d")
            at -= 1
        match = _NUMBERS.match(text, at)
        if match is None:
            continue
        done = match.end()
        decoded = _code_points(match.group()[:MAX_CHARS])
        if decoded:
            found.append((decoded, *folded.span(*match.span())))
    return found


def _places(view: bytes, needle: bytes) -> list[int]:
    found: list[int] = []
    at = view.find(needle)
    while at != -1 and len(found) < MAX_TRIES:
        found.append(at)
        at = view.find(needle, at + 1)
    return found


def _runs(folded: Folded, pattern: re.Pattern[str], decode: Callable[[str], str]) -> list[tuple[str, int, int]]:
    found: list[tuple[str, int, int]] = []
    for match in pattern.finditer(folded.text):
        text = decode(match.group()[:MAX_CHARS])
        if text and text != match.group():
            found.append((text, *folded.span(*match.span())))
        if len(found) >= MAX_RUNS:
            break
    return found


def _utf8(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return ""


def _unescape(run: str) -> str:
    def point(match: re.Match[str]) -> str:
        code = int(match.group(1) or match.group(2), 16)
        return chr(code) if code < 0x110000 else ""

    return re.sub(r"\\u(?:([0-9a-f]{4})|\{([0-9a-f]{1,6})\})", point, run)


def _code_points(run: str) -> str:
    """Decimal code points, or octal ones when every number is three octal digits that read better so."""
    numbers = re.findall(r"\d+", run)
    decimal = _chars([int(n) for n in numbers])
    if all(len(n) == 3 and set(n) <= set("01234567") for n in numbers):
        octal = _chars([int(n, 8) for n in numbers])
        if octal and (not decimal or _letters(octal) > _letters(decimal)):
            return octal
    return decimal


def _chars(codes: list[int]) -> str:
    if any(not (32 <= c < 0x110000 or c in (9, 10, 13)) or 0xD800 <= c < 0xE000 for c in codes):
        return ""
    return "".join(map(chr, codes))


def _letters(text: str) -> int:
    return sum(c.isalpha() or c == " " for c in text)


def _unquote_printable(run: str) -> str:
    return _utf8(quopri.decodestring(run.upper().encode()))


def _unquote(run: str) -> str:
    spaced = run.replace("+", " ") if "%20" not in run and "+" in run else run
    try:
        return urllib.parse.unquote(spaced, errors="strict")
    except UnicodeDecodeError:
        return ""
