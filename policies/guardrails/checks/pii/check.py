"""`pii`: e-mail, phone, credit card (Luhn), IBAN (mod 97), US SSN, IPv4/IPv6, and secrets.

Phones: international numbers (`+41 …`, `0041 …`), national shapes with a trunk prefix or a NANP
layout, other digit groups a word before them calls a phone, and numbers written exactly as one of
``regions`` writes its own (libphonenumber's formats: ``67 788 02 83`` with ``PL`` among them).
Cards: every issuer's number ranges and lengths (`context.card_issued`) with the Luhn check.

Secrets are API keys with a known provider prefix (OpenAI, Anthropic, Stripe, GitHub, GitLab,
Slack, AWS, Google, Hugging Face, JWTs, PEM private-key headers) and any other token of 32+
characters from the base64/url alphabet that mixes letters and digits and has at least
``secret_min_entropy`` bits of Shannon entropy per character (random keys have 4.3 to 5.5; English
identifiers and hex digests stay below 4). Redaction writes ``[EMAIL]``, ``[PHONE]``,
``[CREDIT_CARD]``, ``[IBAN]``, ``[SSN]``, ``[IP_ADDRESS]``, ``[SECRET]`` (``placeholder`` sets the format).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from typing import Literal

from pydantic import Field, field_validator

from policies.guardrails.base import CheckConfig, Finding, Span, any_hit, trailing_token
from policies.guardrails.checks.pii import patterns as p
from policies.guardrails.checks.pii.addresses import (
    byte_string,
    port_after,
    says_address,
    section_marked,
    unassigned,
    version_like,
    versioned,
)
from policies.guardrails.checks.pii.context import card_issued, context, mentions, phone_strength, words_before
from policies.guardrails.checks.pii.labels import OWNERS, acronym_before, labelled, name_before, postal
from policies.guardrails.checks.pii.national import (
    DEFAULT_REGIONS,
    REGIONS,
    NationalFormats,
    international,
    named_regions,
)
from policies.guardrails.checks.pii.native import script_labelled, script_says_phone
from policies.guardrails.checks.pii.shapes import not_a_phone
from policies.guardrails.checks.pii.structure import (
    creditor_reference,
    integer_limit,
    label_before,
    label_form,
    words_of,
)
from policies.guardrails.normalize import Folded

Entity = Literal["email", "phone", "credit_card", "iban", "ssn", "ipv4", "ipv6", "secret"]
ENTITIES: tuple[Entity, ...] = ("email", "phone", "credit_card", "iban", "ssn", "ipv4", "ipv6", "secret")
_PLACEHOLDER_NAMES = {"ipv4": "IP_ADDRESS", "ipv6": "IP_ADDRESS"}
_SPACED = {"phone", "credit_card", "iban"}  # may contain spaces: held by a fixed window on streams
_SPACED_WINDOW = 45  # longest spaced form: a 34-character IBAN in groups of four, plus context
_TOKEN_CAP = 330  # longest whitespace-free entity (an e-mail address) held on streams
Found = list[tuple[int, int, str]]  # folded start, end, entity


class PiiConfig(CheckConfig):
    check: Literal["pii"]
    # What to find: email, phone, credit_card, iban, ssn, ipv4, ipv6, secret.
    entities: list[Entity] = Field(default_factory=lambda: list(ENTITIES), min_length=1)
    # What a redacted value becomes; {entity} is replaced by the entity's name.
    placeholder: str = "[{entity}]"
    # Bits per character a long token needs to count as a secret.
    secret_min_entropy: float = Field(default=4.0, ge=0.0, le=8.0)
    # Where phone numbers written without a country code come from (ISO 3166 codes): their
    # national formats make a number a phone with no word before it saying so.
    regions: list[str] = Field(default_factory=lambda: list(DEFAULT_REGIONS), max_length=64)

    @field_validator("regions")
    @classmethod
    def _known_regions(cls, regions: list[str]) -> list[str]:
        codes = [region.upper() for region in regions]
        for given, code in zip(regions, codes, strict=True):
            if code not in REGIONS:
                hint = " (the United Kingdom is GB)" if code == "UK" else ""
                raise ValueError(f"unknown region {given!r}{hint}: regions are ISO 3166 codes (US, GB, DE, FR, ...)")
        return codes

    def build(self) -> PiiCheck:
        return PiiCheck(self)


class PiiCheck:
    def __init__(self, config: PiiConfig) -> None:
        self.config = config
        self._wanted = frozenset(config.entities)
        patterns = [(name, pat) for name, pat in p.DIGIT_PATTERNS.items() if name in self._wanted]
        self._digit_patterns = [(name, pat) for name, pat in patterns if name != "iban"]  # matched at digit groups
        self._iban = p.DIGIT_PATTERNS["iban"] if "iban" in self._wanted else None  # may open with letter groups
        self._spaced = bool(self._wanted & _SPACED)
        self._national = NationalFormats(config.regions if "phone" in self._wanted else ())
        if "phone" in self._wanted:
            named_regions()  # compiled once per process, at start-up rather than in a request

    def spans(self, folded: Folded) -> list[Span]:
        text = folded.text
        found: Found = []
        if self._digit_patterns or self._iban is not None:
            found += self._digits(folded)
        if "email" in self._wanted and "@" in text:
            found += _emails(folded.ascii)
        if "ipv6" in self._wanted and ":" in text:
            found += _ipv6(text, folded.ascii)
        if "secret" in self._wanted:
            found += _secrets(folded, self.config.secret_min_entropy)
        return [Span(*folded.span(start, end), label=entity) for start, end, entity in found]

    def _digits(self, folded: Folded) -> Found:
        text = folded.text
        found: set[tuple[int, int, str]] = set()
        digits = folded.ascii.translate(p.DIGIT_VIEW)
        ibans = _ibans(text, digits, self._iban) if self._iban is not None else []
        found.update(ibans)
        for run in p.DIGIT_RUN.finditer(digits):
            segment = run.group()
            if segment.count(b"0") < 7 and segment.count(b".") < 3:
                continue  # a year, a price: too few digits for any entity
            # Entities in one run do not overlap: the first pattern to match at a group start wins.
            done = 0
            for at in _group_starts(text, digits, *run.span()):
                if at < done or any(start <= at < end for start, end, _ in ibans):
                    continue
                before: list[str] | None = None
                for name, pattern in self._digit_patterns:
                    match = pattern.match(text, at)
                    if match is None:
                        continue
                    before = words_before(text, at) if before is None else before
                    value = match.group()
                    if name == "credit_card":
                        entity = self._card(value, before, folded, at) if not p.group_before(text, at) else None
                    else:
                        entity = _validated(name, value, before, self._national, folded, at)
                    if entity is not None:
                        found.add((at, at + len(entity), name))
                        done = at + len(entity)
                        break
        return sorted(found)

    def _card(self, value: str, before: list[str], folded: Folded, at: int) -> str | None:
        """The card `value` is, or starts with: where the pattern ran on from a card number into the
        digits after it (an expiry date, a CVV), so that the whole is grouped as no card is, the card
        is the first groups that are. (Never the tail of a longer run of digit groups: the caller.)"""
        entity = _validated("credit_card", value, before, self._national, folded, at)
        if entity is None:
            for shorter in p.card_prefixes(value):
                if (entity := _validated("credit_card", shorter, before, self._national, folded, at)) is not None:
                    break
        return entity

    def judge(self, spans: Sequence[Span]) -> Finding:
        return any_hit(spans, "found")

    def hold(self, folded: str) -> int:
        hold = trailing_token(folded, _TOKEN_CAP)
        if self._spaced:
            tail = folded[-_SPACED_WINDOW:]
            first = next((i for i, c in enumerate(tail) if c.isdigit()), None)
            if first is not None:
                hold = max(hold, len(tail) - max(0, first - 6))
        return hold

    def placeholder(self, span: Span) -> str:
        name = _PLACEHOLDER_NAMES.get(span.label, span.label.upper())
        return self.config.placeholder.format(entity=name)


def _emails(view: bytes) -> Found:
    """From each '@': the domain forward (cheap to refute), then the local part backward.

    On the byte view, so both are ASCII (folding already made accented Latin ASCII) and any other
    character, such as a CJK one written right before the address, ends the local part."""
    found: Found = []
    local_view: bytes | None = None
    at = view.find(b"@")
    while at != -1:
        domain = p.EMAIL_DOMAIN.match(view, at + 1)
        if domain is not None:
            local_view = local_view or view.translate(p.EMAIL_LOCAL_VIEW)
            floor = max(0, at - p.EMAIL_LOCAL_MAX)
            start = local_view.rfind(b" ", floor, at) + 1 or floor
            if start < at and (start == 0 or local_view[start - 1] == 32):  # the whole local part, not its tail
                found.append((start, domain.end(), "email"))
                at = domain.end()
        at = view.find(b"@", at + 1)
    return found


def _ipv6(text: str, view: bytes) -> Found:
    found: Found = []
    done = 0
    for hint in p.COLONS.finditer(view.translate(p.HEX_VIEW)):
        if hint.start() < done:
            continue
        for match in p.IPV6.finditer(text, max(done, hint.start() - 40), min(len(text), hint.end() + 45)):
            try:
                ipaddress.IPv6Address(match.group())
            except ValueError:
                continue
            if match.group() != "::" and not byte_string(match.group()):
                found.append((match.start(), match.end(), "ipv6"))
                done = match.end()
    return found


def _group_starts(text: str, digits: bytes, start: int, end: int) -> list[int]:
    """Where an entity may begin in a run of digits: each digit group, and a '+' or '(' before it."""
    starts: list[int] = []
    for group in p.GROUP_START.finditer(digits, start, end):
        at = group.start()
        if at > 0 and text[at - 1] in "+(":
            starts.append(at - 1)
        starts.append(at)
    return starts


def _ibans(text: str, digits: bytes, pattern: re.Pattern[str]) -> list[tuple[int, int, str]]:
    """From each country code and check digits (two letters, two digits, after a separator): the IBAN
    pattern, then the mod-97 check. Its account part may be mostly letters (``CH43 4199 1ZHB 6LN4``),
    so it is not looked for in runs of digits."""
    found: list[tuple[int, int, str]] = []
    at = digits.find(p.IBAN_HEAD)
    while at != -1:
        if (at == 0 or digits[at - 1] in b"1.") and not creditor_reference(text, at):
            match = pattern.match(text, at)
            valid = p.iban_match(match.group()) if match is not None else None
            if valid is not None:
                found.append((at, at + len(valid), "iban"))
        at = digits.find(p.IBAN_HEAD, at + 1)
    return found


def _validated(
    entity: str, value: str, before: list[str], national: NationalFormats, folded: Folded | None = None, at: int = 0
) -> str | None:
    """The matched text (at `at` in the `folded` text) if it is the entity: checksums and digit counts,
    card issuers, phone shapes and national formats (of a number with no other digit group beside it),
    and what the words before it say (`context`); an IBAN may be trimmed."""
    text = folded.text if folded is not None else ""
    if entity == "iban":
        return p.iban_match(value)
    verdict = context(before, entity)
    if verdict == "negative":
        return None
    if entity == "credit_card":
        digits = p.digits_of(value)
        laid_out = verdict == "positive" or p.card_layout(value)
        if verdict != "positive" and context(before, "phone") == "negative" and label_form(text, at):
            return None  # a label that names another thing (an order, a parcel, a reference) and no card
        return value if laid_out and p.luhn(digits) and card_issued(digits) else None
    if entity == "ssn":  # dashed, or said to be one
        return value if "-" in value or verdict == "positive" else None
    if entity == "phone":
        number = p.EXTENSION.sub("", value)
        count = len(p.digits_of(number))
        shape = phone_strength(value)
        called = verdict == "positive" or script_says_phone(text, at)
        if (
            not 7 <= count <= 15
            or shape == "date"
            or international(number) is False
            or not_a_phone(text, at, at + len(number), called_phone=called)
            or integer_limit(p.digits_of(number))
        ):
            return None
        # What the words name it, when none says phone: another thing's identifier, a postal code.
        if not called and not value.startswith("+"):
            says_phone = mentions(before, "phone")
            if labelled(before, says_phone) or (
                not says_phone
                and (
                    postal(text, at, at + len(number), before)
                    or script_labelled(text, at)
                    or (folded is not None and acronym_before(folded, at))
                )
            ):
                return None
        # A label with no word saying phone names some other thing's number, whatever the label's words
        # (an international prefix, or a person's name as the label, still make a phone).
        if (
            not called
            and verdict != "positive"
            and not value.startswith(("+", "00"))
            and folded is not None
            and not mentions(before, "phone")
            and _names_a_thing(folded, at, number, national)
        ):
            return None
        said = called or verdict != "none" or shape == "strong"
        if said:
            return value
        alone = not p.group_before(text, at) and not p.group_after(text, at + len(value))
        if not alone:
            return None
        # A mobile range needs no format, but it needs a sentence silent about what the number is.
        if national.written(number) or (verdict == "none" and national.mobile(number)):
            return value
        # After a person's name (a contact list, a signature), as any of many more regions writes it.
        named = verdict == "none" and folded is not None and name_before(folded, at)
        return value if named and named_regions().written(number) else None
    if entity == "ipv4" and (unassigned(value) or section_marked(text, at, at + len(value))):
        return None
    if entity == "ipv4" and version_like(value):
        return value if says_address(before) or port_after(text, at + len(value)) else None
    if entity == "ipv4" and versioned(value, before):
        return None
    return value


def _names_a_thing(folded: Folded, at: int, number: str, national: NationalFormats) -> bool:
    """Does a label before the number at `at` name it (`structure.label_before`)? Not a label of a person
    or a place: one capitalised word (or a word of a script without cases) and a colon before a number
    written as a region writes its phones (``Joost: 06 87797380``, ``Roskilde: 46 93 79 04``, ``지우:
    011-…``), a label that owns the number (``Mój numer:``) or abbreviates a phone word (``M:``)."""
    found = label_before(folded.text, at)
    if found is None:
        return False
    words = words_of(folded.text[found[0] : found[1]])
    if any(word in OWNERS or len(word) == 1 for word in words):  # "M:", "T:" abbreviate phone words
        return False
    if name_before(folded, at):
        return False
    source = words_of(folded.source[slice(*folded.span(found[0], found[1]))])
    if not found[2] or len(source) != 1:
        return True  # keys, other separators and phrases name things; a name takes one word and a colon
    word = source[0]
    named = (word[:1].isupper() and word[1:].islower()) or word.upper() == word.lower()
    return not (named and (national.written(number) or named_regions().written(number)))


def _secrets(folded: Folded, min_entropy: float) -> Found:
    """Keys live in long runs of base64/url characters: find those runs with C-speed byte searches."""
    text = folded.text
    tokens = folded.ascii.translate(p.TOKEN_VIEW)
    found: Found = []
    start = tokens.find(p.LONG_RUN)
    while start != -1:
        end = tokens.find(b" ", start)
        end = len(tokens) if end == -1 else end
        keyed = _keyed(text, start, end)
        found += keyed
        if not keyed and p.MIN_TOKEN <= end - start <= p.MAX_TOKEN:
            original = folded.source[slice(*folded.span(start, end))]
            if _random_looking(original, min_entropy):
                found.append((start, end, "secret"))
        start = tokens.find(p.LONG_RUN, end)
    return found


def _keyed(text: str, start: int, end: int) -> Found:
    found: Found = []
    for prefix, pattern in p.SECRET_PREFIXES.items():
        at = text.find(prefix, start, end)
        while at != -1:  # every occurrence: "hf_token=hf_..." holds the prefix twice
            if at == start or text[at - 1] not in p.B64_CHARS or text[at - 1] == "=":
                match = pattern.match(text, at)
                if match is not None:
                    found.append((at, match.end(), "secret"))
                    break
            at = text.find(prefix, at + 1, end)
    return found


def _random_looking(token: str, min_entropy: float) -> bool:
    has_digit = any(c.isdigit() for c in token)
    has_alpha = any(c.isalpha() for c in token)
    return has_digit and has_alpha and p.entropy(token) >= min_entropy
