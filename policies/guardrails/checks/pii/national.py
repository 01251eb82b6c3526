"""Phone numbers written the national way, without a country code, judged by libphonenumber's
metadata (the `phonenumbers` package): a number is one when a region of the policy's `regions`
issues it (its fixed-line, mobile, toll-free or VoIP ranges and lengths) and writes it in exactly
these groups. "67 788 02 83" is a landline as Poland writes it; "1 234 567 890" is a count, which
no region groups so; "12 34 56 78" in a table is a phone only where 2-2-2-2 is a national format
(Denmark, Norway) and only when that region is hinted.

Only the metadata is read (its patterns compiled once per region), not `phonenumbers.parse`:
a few regular expressions per region instead of ~50 us of parsing per candidate.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import phonenumbers
from phonenumbers import PhoneMetadata

# North America, most of Western Europe, India, Brazil, Mexico, China: regions whose national formats leave
# few other kinds of number looking alike (none writes 8 digits as 2-2-2-2 or 4-4).
DEFAULT_REGIONS = (
    *("US", "CA", "GB", "IE", "DE", "AT", "CH", "FR", "BE", "NL", "ES", "PT", "IT", "PL", "SE"),
    *("IN", "BR", "MX", "CN"),
)
REGIONS = frozenset(phonenumbers.SUPPORTED_REGIONS)
# Regions whose formats a number is read in when a person's name stands right before it (a contact
# list, a signature: "Lars Nielsen 39 14 28 60"), beside the policy's: the rest of Europe, East and
# South-East Asia, Oceania, the Middle East and South America's largest. Their short layouts (2-2-2-2,
# 4-4, 3-3-3) are too often something else to be read with no name or word saying phone.
NAMED_REGIONS = (
    *("DK", "NO", "FI", "IS", "EE", "LV", "LT", "CZ", "SK", "HU", "RO", "BG", "HR", "SI", "GR", "CY", "MT"),
    *("LU", "SG", "HK", "TW", "JP", "KR", "MY", "TH", "ID", "PH", "VN", "AU", "NZ", "ZA", "IL", "AE", "SA"),
    *("TR", "RU", "UA", "AR", "CL", "CO", "PE"),
)
_DIGIT_GROUPS = re.compile(r"\d+")
_NOT_DIGITS = {ord(c): None for c in " -.()/"}
_WIDTHS = re.compile(r"\(\\d(?:\{(\d+)(?:,(\d+))?\})?\)")  # every format's groups: (\d), (\d{2}), (\d{3,4})
_TEMPLATE_TOKENS = re.compile(r"\\\d|\d+|[^\\\d]")


@dataclass(frozen=True, slots=True)
class _Format:
    leading: re.Pattern[str] | None  # the digits a number must start with to be written so
    pattern: re.Pattern[str]  # the whole national number, one capture group per written group
    # How the region writes it, as the digit groups shown: literal digits (a trunk prefix) or the
    # number's capture groups by index (`0\\1 \\2`: ("0", 1), (2,)).
    written: tuple[tuple[tuple[str | int, ...], ...], ...]
    trunk: bool  # the region always writes its trunk prefix before these numbers (0171 …, not 171 …)


@dataclass(frozen=True, slots=True)
class _Region:
    prefix: str  # the national (trunk) prefix: "0", "1" (NANP), "" (none)
    shapes: frozenset[tuple[int, ...]]  # every grouping its formats can show: a hash lookup rules most out
    lengths: frozenset[int]  # of the national numbers it issues
    issued: tuple[re.Pattern[str], ...]  # the ranges it issues (fixed line, mobile, toll free, VoIP)
    mobile: re.Pattern[str] | None  # its mobile ranges alone
    formats: tuple[_Format, ...]

    def writes(self, digits: str, sizes: tuple[int, ...]) -> bool:
        """Are these digits, in groups of these sizes (one of its `shapes`), a number of this region
        written its way?"""
        nationals = [digits]
        if self.prefix and digits.startswith(self.prefix):
            nationals.append(digits[len(self.prefix) :])
        for national in nationals:
            if len(national) not in self.lengths or not any(p.fullmatch(national) for p in self.issued):
                continue
            for number_format in self.formats:
                if number_format.leading is not None and number_format.leading.match(national) is None:
                    continue
                match = number_format.pattern.fullmatch(national)
                if match is None:
                    continue
                for template in number_format.written:
                    shown = tuple(sum(len(p) if isinstance(p, str) else len(match[p]) for p in g) for g in template)
                    if shown == sizes and sum(shown) == len(digits):
                        return True
                break  # the format it takes is the first that fits
        return False

    def issues_mobile(self, digits: str) -> bool:
        """Are these digits (with or without the trunk prefix) one of its mobile numbers?"""
        if self.mobile is None:
            return False
        if self.prefix and digits.startswith(self.prefix) and self.mobile.fullmatch(digits[len(self.prefix) :]):
            return True
        return self.mobile.fullmatch(digits) is not None and not self._trunk_missing(digits)

    def _trunk_missing(self, national: str) -> bool:
        """Is `national` written without the trunk prefix its region always writes (a German 171 …)?"""
        for number_format in self.formats:
            if number_format.leading is not None and number_format.leading.match(national) is None:
                continue
            if number_format.pattern.fullmatch(national) is not None:
                return number_format.trunk
        return False


class NationalFormats:
    """The national formats of some regions (ISO 3166 codes, as libphonenumber knows them)."""

    def __init__(self, regions: Sequence[str]) -> None:
        # The regions by each grouping they write: a candidate is looked up once, not per region.
        self._by_shape: dict[tuple[int, ...], list[_Region]] = {}
        self._regions = [_region(code) for code in dict.fromkeys(regions)]
        for region in self._regions:
            for shape in region.shapes:
                self._by_shape.setdefault(shape, []).append(region)

    def written(self, value: str) -> bool:
        """Is `value` (digits in groups, any separators) a number one of the regions issues, grouped
        as that region writes it?"""
        groups = _DIGIT_GROUPS.findall(value)
        if len(groups) < 2:
            return False
        sizes = tuple(len(group) for group in groups)
        regions = self._by_shape.get(sizes)
        if regions is None:
            return False
        digits = "".join(groups)
        return any(region.writes(digits, sizes) for region in regions)

    def mobile(self, value: str) -> bool:
        """Is `value` a mobile number of one of the regions, written in no format of theirs but in
        groups of three digits or more (``612 155 224``) or as one run (``6175550142``)? A mobile
        range is narrow (a region's 10-digit mobiles are a few of all 10-digit numbers) and
        such layouts are not a date's, a time's or a draw's."""
        groups = _DIGIT_GROUPS.findall(value)
        if not groups or min(map(len, groups)) < _MOBILE_GROUP:
            return False
        digits = "".join(groups)
        return _MOBILE_DIGITS[0] <= len(digits) <= _MOBILE_DIGITS[1] and any(
            region.issues_mobile(digits) for region in self._regions
        )


@cache
def named_regions() -> NationalFormats:
    """`NAMED_REGIONS`' formats (about a third of a second to compile, once per process)."""
    return NationalFormats(NAMED_REGIONS)


def international(value: str) -> bool | None:
    """For a number written with its calling code (``+45 …``, ``0045 …``): is some calling code followed
    by a national number as long as its regions' numbers are (libphonenumber's possible lengths, a
    ``(0)`` or a trunk 0 written after the code dropped)? ``0045 7821`` is no Danish number: Denmark's
    have eight digits. None for a number written otherwise."""
    if value.startswith("+"):
        rest = value[1:]
    elif value.startswith("00") and value[2:3] != "0":
        rest = value[2:]
    else:
        return None
    digits = rest.replace("(0)", "", 1).translate(_NOT_DIGITS)
    for size in (1, 2, 3):
        lengths = _calling_code_lengths(int(digits[:size] or 0))
        national = digits[size:]
        if len(national) in lengths or (national[:1] == "0" and len(national) - 1 in lengths):
            return True
    return False


@cache
def _calling_code_lengths(code: int) -> frozenset[int]:
    lengths: set[int] = set()
    for region in phonenumbers.COUNTRY_CODE_TO_REGION_CODE.get(code, ()):
        metadata = PhoneMetadata.metadata_for_region_or_calling_code(code, region)
        if metadata is not None and metadata.general_desc is not None:
            lengths.update(metadata.general_desc.possible_length or ())
    return frozenset(lengths)


_MOBILE_GROUP = 3  # the smallest group of a mobile written in no national format
_MOBILE_DIGITS = (9, 12)  # mobiles without a country code: 9 (Spain, France without the 0) to 12 digits


@cache
def _region(code: str) -> _Region:
    metadata = PhoneMetadata.metadata_for_region(code)
    if metadata is None:
        raise ValueError(f"unknown region {code!r}")
    descs = [d for d in (metadata.fixed_line, metadata.mobile, metadata.toll_free, metadata.voip) if d is not None]
    issued = tuple(re.compile(d.national_number_pattern) for d in descs if d.national_number_pattern)
    lengths = frozenset(length for d in descs for length in d.possible_length or ())
    number_formats = metadata.number_format
    if not number_formats and metadata.country_code is not None:  # sharing its calling code's (Canada: the US's)
        main = PhoneMetadata.metadata_for_region(phonenumbers.region_code_for_country_code(metadata.country_code))
        number_formats = main.number_format if main is not None else []
    formats = []
    shapes: set[tuple[int, ...]] = set()
    for number_format in number_formats:
        if not number_format.pattern or not number_format.format:
            continue
        leading = number_format.leading_digits_pattern
        rule = number_format.national_prefix_formatting_rule
        written = [number_format.format]
        if rule:  # the region writes its trunk prefix (or parentheses) on the first group
            with_rule = number_format.format.replace("\\1", rule, 1)
            written = [with_rule, *written] if number_format.national_prefix_optional_when_formatting else [with_rule]
        shown = tuple(map(_shown, written))
        widths = [(int(low or 1), int(high or low or 1)) for low, high in _WIDTHS.findall(number_format.pattern)]
        for groups in shown:
            shapes.update(_shapes(groups, widths))
        trunk = bool(rule and metadata.national_prefix and rule.startswith(metadata.national_prefix))
        trunk = trunk and not number_format.national_prefix_optional_when_formatting
        formats.append(
            _Format(re.compile(leading[-1]) if leading else None, re.compile(number_format.pattern), shown, trunk)
        )
    mobile = metadata.mobile.national_number_pattern if metadata.mobile is not None else None
    return _Region(
        metadata.national_prefix or "",
        frozenset(shapes),
        lengths,
        issued,
        re.compile(mobile) if mobile else None,
        tuple(formats),
    )


def _shapes(template: tuple[tuple[str | int, ...], ...], widths: list[tuple[int, int]]) -> set[tuple[int, ...]]:
    """The group sizes a template can show, given its capture groups' widths."""
    shapes: set[tuple[int, ...]] = {()}
    for group in template:
        low = sum(len(p) if isinstance(p, str) else widths[p - 1][0] for p in group)
        high = sum(len(p) if isinstance(p, str) else widths[p - 1][1] for p in group)
        shapes = {(*shape, size) for shape in shapes for size in range(low, high + 1)}
    return shapes


def _shown(template: str) -> tuple[tuple[str | int, ...], ...]:
    """A format template (`(0\\1) \\2-\\3`) as its digit groups: runs of literal digits and capture
    group references, split where anything else (a space, a dash, a parenthesis) stands."""
    groups: list[tuple[str | int, ...]] = []
    current: list[str | int] = []
    for token in _TEMPLATE_TOKENS.findall(template):
        if token.startswith("\\"):
            current.append(int(token[1:]))
        elif token.isdigit():
            current.append(token)
        elif current:
            groups.append(tuple(current))
            current = []
    if current:
        groups.append(tuple(current))
    return tuple(groups)
