"""Numbers shaped like phones that their own layout or neighbours show to be something else: the
`pii` check's structural refutations, applied to a phone candidate whatever the words before it say.

- **Dates and stamps**: day, month and year in any separator (``03 04 2025``, ``15.03.2025``), a
  year first (``2024-03-15``, ``2024-0415-0932``): a 4-digit year then a month.
- **Decimals**: one dot and nothing else between the digits (``641.5945``, ``12.3456``): Dewey
  numbers, measurements, prices; phones written with dots have several.
- **Round amounts and fillers**: two groups or more of zeros alone (``3 100 000 000``,
  ``9400 1000 0000 0000``): no numbering plan issues numbers so.
- **Draws and series**: four small groups or more in rising order (``04 11 23 35 42 49``), unless a
  word before says phone.
- **Amounts and quantities**: a currency sign or code just before, or a currency word or a unit of
  measure just after (``0045 7821 kWh``, ``4 412 883 MB``).
- **Parts of longer numbers**: the groups around it (single separators between) hold more than 15
  digits, the most any phone has (E.164): a tracking or account number's tail.
- **Tails**: a group of digits joined to it by a dash, dot or slash just before (``2024-0415-0932``),
  or one of three digits or more by a space (``555 0123 4567``): the whole was no phone, so its end
  is none either (a lone ``1-`` is NANP's trunk prefix, ``+44 `` a calling code).
- **Parts of codes**: joined by a dash or slash to a token of letters and digits (``2F4A-99812-7731``)
  or to a few letters (``Q-45321-2024``, ``INV-7731-2201``; not a phone word: ``Tel-``); the last
  groups of a code written in spaced groups, some of letters and digits (a UPS number,
  ``1Z 12E 4W5 03 1234 5678``, a Colissimo ``6A 221 904 8817 2``); or the first groups of one, a
  token of letters and digits right after (``PC 075 112 23 V0041``, ``0000 0004 4418 229X``).
- **Time ranges**: two clock times on the five minutes joined by a dash (``0800-1700``, ``0930-1245``):
  opening hours and shifts. One phone's two halves are such times about once in a thousand.
- **Placeholders**: one digit repeated (``0000000000``, ``9999 9999``) or the digits in a row, up or
  down (``1234567890``, ``0123 4567 89``, ``9876543210``): what forms and fixtures fill a field with. No
  numbering plan issues them (NANP area codes never start with 0 or 1).
- **Decimals and powers**: the fraction of a decimal written in spaced groups (``6.022 140 76``: a
  digit and a point just before, no point inside) or a number times a power of ten (a multiplication
  sign and ``10^23``, or ``e+23``).
- **Year serials**: a year, a dash or a slash and five to seven digits (``2018-234567``,
  ``2021/118447``): patent applications and priorities, court and case files, numbered yearly.
"""

from __future__ import annotations

import re
from itertools import pairwise

_YEAR = r"(?:19|20)\d\d"
_DAY_MONTH = r"(?:0?[1-9]|[12]\d|3[01])"
_DATE = re.compile(
    rf"(?:{_DAY_MONTH}[ ./-]{_DAY_MONTH}[ ./-]{_YEAR}|{_YEAR}[ ./-](?:0[1-9]|1[0-2])(?:[ ./-]?\d\d)?)(?!\d)"
)
_DECIMAL = re.compile(r"\d+\.\d+")
_GROUPS = re.compile(r"\d+")
_CURRENCY_SIGN = "$€£¥₹₽₩₺₪"
_CURRENCY_BEFORE = re.compile(rf"(?:[{_CURRENCY_SIGN}]|\b(?:usd|eur|gbp|chf|jpy|rs|inr|zl|kr))\.?\s?$")
_CURRENCY_AFTER = re.compile(
    rf"^\s?(?:[{_CURRENCY_SIGN}]|(?:usd|eur|gbp|chf|jpy|cny|inr|dollars?|euros?|pounds?|yen|yuan|rupees?|"
    r"francs?|kronor|kroner|zloty|reais|pesos?|won|lira|rubles?|roubles?|bucks|cents?)\b)"
)
_UNIT_AFTER = re.compile(
    r"^\s?(?:[kmgt]?wh|[kmg]w|kva|m[23²³]|[kmc]m|kg|[kmgt]i?b|[kmgt]bit|[kmg]?hz|rpm|psi|[hk]pa|mbar|ml|cl|"
    r"lbs|mph|bytes?|tonnes?|litres?|liters?|metres?|meters?|miles?|kcal)(?![a-z0-9])"
)
# A multiplication sign (or a middle dot, an asterisk) and 10, or an exponent: x 10^23 (superscripts fold
# to digits: x 1023), e+23.
_POWER_AFTER = re.compile(r"^\s?(?:[\u00d7\u00b7*]\s?10|e[+-]?\d)")
_YEAR_SERIAL = re.compile(rf"{_YEAR}[-/]\d{{5,7}}")
_PLACEHOLDER_DIGITS = 7
_RISING = "0123456789" * 3
_FALLING = _RISING[::-1]
_CHAIN_TOKENS = 6  # spaced groups of letters and digits read back from a number
_CHAIN_TOKEN = 8
_CLOCK_OR_ORDINAL = re.compile(r"\d{1,2}(?:am|pm|h|hr|hrs)|\d+(?:st|nd|rd|th)")
_TIME_RANGE = re.compile(r"(?:[01]\d|2[0-3])[0-5][05]-(?:[01]\d|2[0-3])[0-5][05]")
_RANGE_LENGTH = 9  # HHMM-HHMM
_CODE_HEAD = re.compile(r" ([a-z0-9]{3,12})(?![\w-])")  # a token of letters and digits after a space
_SPACED_TAIL = re.compile(r"(?<![\d+])\d{3,} $")
_PREFIX_LETTERS = 5  # Q-…, INV-…, PO-…: the longest letter prefix of a code
_RUN_BEFORE = re.compile(r"(?:\d+[ .\-/])+$")
_RUN_AFTER = re.compile(r"^(?:[ .\-/]\d+)+")
_TAIL = re.compile(r"\d\d[-./]$")  # the rest of a number joined tight before it (2024-0415-0932)
_JOINS = frozenset(" .-/")
_CURRENCY_REACH = 12  # "dollars" after, "USD " before
_LONGEST_PHONE = 15  # digits, E.164
_REACH = 40
_CODE_REACH = 24


def not_a_phone(text: str, start: int, end: int, *, called_phone: bool = False) -> bool:
    """Does the number at ``text[start:end]`` (folded: lower case) read as something other than a
    phone by its own shape or what touches it? A rising series is one only when no word before it
    says phone (``Tel. 06.12.34.56.78`` is a French number)."""
    value = text[start:end]
    if (
        _DATE.match(value)
        or _DECIMAL.fullmatch(value)
        or (len(value) == _RANGE_LENGTH and _TIME_RANGE.fullmatch(value))
    ):
        return True
    groups = _GROUPS.findall(value)
    if sum(1 for group in groups if not group.strip("0")) >= 2 or (not called_phone and _rising(groups)):
        return True
    if _placeholder("".join(groups)) or _YEAR_SERIAL.fullmatch(value):
        return True
    # Short windows, and the costlier searches only where a separator touches the number.
    if _CURRENCY_BEFORE.search(text, max(0, start - _CURRENCY_REACH), start):
        return True
    after = text[end : end + _CURRENCY_REACH]
    if _CURRENCY_AFTER.match(after) or _UNIT_AFTER.match(after) or _POWER_AFTER.match(after):
        return True
    joined_before = start > 1 and text[start - 1] in _JOINS and text[start - 2].isdigit()
    if joined_before and text[start - 1] == "." and "." not in value:
        return True  # a decimal's fraction in spaced groups: 6.022 140 76
    joined_after = text[end : end + 1] in _JOINS and text[end + 1 : end + 2].isdigit()
    if _code_part(text, start, end, called_phone) or _code_tail(text, start) or _code_head(text, end):
        return True
    if not (joined_before or joined_after):
        return False
    before = text[max(0, start - _REACH) : start]
    if joined_before and (_TAIL.search(before) or (not called_phone and _SPACED_TAIL.search(before))):
        return True
    return _longer_run(before, value, text[end : end + _REACH])


def _placeholder(digits: str) -> bool:
    """One digit repeated, or the digits in a row up or down (``0123456789``, ``9876543210``)."""
    if len(digits) < _PLACEHOLDER_DIGITS:
        return False
    return digits == digits[0] * len(digits) or digits in _RISING or digits in _FALLING


def _code_part(text: str, start: int, end: int, called_phone: bool) -> bool:
    """Is the number joined by a dash or slash to a token of letters and digits (``2F4A-99812``), or
    to a few letters before it (``Q-45321``) when no word says phone (``Tel-0612…``)?"""
    if start and text[start - 1] in "-/":
        token = text[max(0, start - _CODE_REACH) : start - 1].rsplit(None, 1)[-1:] or [""]
        if _mixed(token[0]):
            return True
        letters = token[0][-_PREFIX_LETTERS - 1 :]
        if not called_phone and letters.isalpha() and letters.isascii() and len(letters) <= _PREFIX_LETTERS:
            return True
    if text[end : end + 1] in ("-", "/"):
        token = text[end + 1 : end + 1 + _CODE_REACH].split(None, 1)[:1] or [""]
        return _mixed(token[0])
    return False


def _code_tail(text: str, start: int) -> bool:
    """Is the number the last groups of a code written in spaced groups, one of them of letters and
    digits (``1z 12e 4w5 03 1234 5678``)? A clock time or an ordinal (``9am``, ``2nd``) is no code."""
    if start < 2 or text[start - 1] != " " or not text[start - 2].isalnum():
        return False
    tokens = text[max(0, start - _CODE_REACH * 2) : start - 1].rsplit(" ", _CHAIN_TOKENS)
    for token in reversed(tokens[1:] if len(tokens) > _CHAIN_TOKENS else tokens):
        if not (token.isascii() and token.isalnum()) or len(token) > _CHAIN_TOKEN:
            return False  # the chain of spaced groups ends
        if _code_token(token):
            return True
    return False


def _code_head(text: str, end: int) -> bool:
    """Is the number the first groups of a code, a token of letters and digits right after it
    (``075 112 23 v0041``)? A clock time or an ordinal (``9am``, ``2nd``) is no code."""
    if text[end : end + 1] != " ":
        return False
    head = _CODE_HEAD.match(text, end)
    return head is not None and _code_token(head.group(1))


def _code_token(token: str) -> bool:
    """Letters and digits together, three or more, or two that start with the digit (``6a``, ``1z``)."""
    if len(token) < 2 or token.isalpha() or token.isdigit() or (len(token) == 2 and not token[0].isdigit()):
        return False
    return not _CLOCK_OR_ORDINAL.fullmatch(token)  # alphanumeric, neither all letters nor all digits: mixed


def _mixed(token: str) -> bool:
    return any(c.isalpha() for c in token) and any(c.isdigit() for c in token)


def _rising(groups: list[str]) -> bool:
    """Four or more numbers of one or two digits, each greater than the last: a draw, a series."""
    if len(groups) < 4 or any(len(group) > 2 for group in groups):
        return False
    numbers = [int(group) for group in groups]
    return all(a < b for a, b in pairwise(numbers))


def _longer_run(before: str, value: str, after: str) -> bool:
    """Do the digit groups joined to this number by single separators hold more than a phone can?"""
    if value.startswith("+"):
        return False
    joined = (m.group() if (m := _RUN_BEFORE.search(before)) else "") + value
    joined += m.group() if (m := _RUN_AFTER.match(after)) else ""
    return sum(map(len, _GROUPS.findall(joined))) > _LONGEST_PHONE
