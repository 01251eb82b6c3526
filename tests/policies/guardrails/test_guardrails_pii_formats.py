"""The `pii` check on the formats of many countries: phones written the national way with no word
saying so (judged by libphonenumber's formats of the policy's `regions`), cards of every issuer in
any common grouping, and the numbers that must stay: counts, look-alike groups beside others,
order numbers in the languages of the default regions."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from policies.guardrails.checks.pii.check import PiiConfig
from policies.guardrails.checks.pii.patterns import card_prefixes, luhn
from tests.support.guardrail_helpers import check_input

REDACT = {"check": "pii", "action": "redact"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Biuro 32 412 77 05, ul. Długa 4", "Biuro [PHONE], ul. Długa 4"),  # Poland, 2-3-2-2
        ("Marta 512 204 318 jutro", "Marta [PHONE] jutro"),  # Poland, a mobile in threes
        ("Sede de Sevilla 954 21 63 80", "Sede de Sevilla [PHONE]"),  # Spain
        ("Ana 622 48 17 35", "Ana [PHONE]"),
        ("Ufficio di Napoli 081 552 3719", "Ufficio di Napoli [PHONE]"),  # Italy, the leading 0 is the number's
        ("Luca 340 771 2048", "Luca [PHONE]"),
        ("Filial Curitiba (41) 3021-7788", "Filial Curitiba [PHONE]"),  # Brazil
        ("Priya 98450 17263 Mysore", "Priya [PHONE] Mysore"),  # India
        ("Porto, loja 22 608 4471", "Porto, loja [PHONE]"),  # Portugal
        ("Bern 031 382 44 61", "Bern [PHONE]"),  # Switzerland, trunk 0
    ],
)
async def test_a_national_format_of_a_default_region_is_a_phone_without_a_keyword(text: str, expected: str) -> None:
    assert (await check_input(REDACT, text)).prompt == expected


async def test_the_regions_setting_says_whose_national_formats_count() -> None:
    danish = "Jens 38 14 72 05"  # Denmark writes 2-2-2-2: no default region does
    assert (await check_input(REDACT, danish)).prompt == danish
    assert (await check_input({**REDACT, "regions": ["DK"]}, danish)).prompt == "Jens [PHONE]"
    polish = "Pani Ewa 32 412 77 05"  # ("Biuro", an office, says phone: the office words of every language)
    assert (await check_input({**REDACT, "regions": ["US"]}, polish)).prompt == polish


def test_an_unknown_region_is_refused_naming_it() -> None:
    with pytest.raises(ValidationError, match=r"unknown region 'UK' \(the United Kingdom is GB\)"):
        PiiConfig.model_validate({**REDACT, "regions": ["GB", "UK"]})
    assert PiiConfig.model_validate({**REDACT, "regions": ["pl"]}).regions == ["PL"]


@pytest.mark.parametrize(
    "text",
    [
        "Visitors: 1 234 567, then 8 336 817 and 12 500 000.",  # thousands, grouped as no region writes a phone
        "Sample 32 412 77 05 19 in the survey",  # a national shape among other groups of digits
        "Matrix row: 512 204 318 771 050",
        "Rechnungsnummer 0170 2233 4455 ist offen.",  # a German compound naming an invoice
        "Commande 01 42 68 53 00 12 expédiée.",  # French: an order
        "Pedido 954 21 63 80 enviado.",  # Spanish: an order
        "Zamówienie 512 204 318 wysłane.",  # Polish: an order
        "Total 512 204 318 PLN",
        "Released 2025 03 14 at 09 30",
        "Coordinates 48 51 24 N, 2 21 07 E",
    ],
)
async def test_numbers_that_only_look_like_national_phones_stay(text: str) -> None:
    outcome = await check_input(REDACT, text)
    assert outcome.prompt == text, outcome.verdicts


async def test_a_negative_word_further_back_does_not_hide_a_phone() -> None:
    text = "Send the invoice question to Kim, 212-555-0148."
    assert (await check_input(REDACT, text)).prompt == "Send the invoice question to Kim, [PHONE]."
    assert (await check_input(REDACT, "Invoice 212-555-0148 is due")).prompt == "Invoice 212-555-0148 is due"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("電話は080-2231-4417です。", "電話は[PHONE]です。"),  # no space around a number in CJK text
        ("연락처는 010-7712-3381입니다", "연락처는 [PHONE]입니다"),
        ("カード4539148803436467で支払い", "カード[CREDIT_CARD]で支払い"),
    ],
)
async def test_numbers_inside_cjk_text(text: str, expected: str) -> None:
    assert (await check_input(REDACT, text)).prompt == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Pay 4539 1488 0343 6467 12/28 now", "Pay [CREDIT_CARD] 12/28 now"),  # the expiry after it
        ("Amex 3782 822463 10005 1234", "Amex [CREDIT_CARD] 1234"),  # the security code after it
        ("card 4539.1488.0343.6467", "card [CREDIT_CARD]"),  # dotted groups
        ("card  4539  1488  0343  6467 ok", "card  [CREDIT_CARD] ok"),  # doubled spaces, as pasted from a PDF
    ],
)
async def test_card_groupings_and_the_digits_beside_a_card(text: str, expected: str) -> None:
    assert (await check_input(REDACT, text)).prompt == expected


# (network, a prefix it issues, the lengths it issues)
ISSUERS: list[tuple[str, str, tuple[int, ...]]] = [
    ("Visa", "4", (13, 16, 19)),
    ("Mastercard", "51", (16,)),
    ("Mastercard", "55", (16,)),
    ("Mastercard 2-series", "2221", (16,)),
    ("Mastercard 2-series", "2720", (16,)),
    ("American Express", "34", (15,)),
    ("American Express", "37", (15,)),
    ("Discover", "6011", (16, 19)),
    ("Discover", "644", (16,)),
    ("Discover", "65", (16,)),
    ("JCB", "3528", (16, 19)),
    ("JCB", "3589", (16,)),
    ("Diners Club", "300", (14,)),
    ("Diners Club", "36", (14,)),
    ("Diners Club", "38", (16,)),
    ("UnionPay", "62", (16, 17, 18, 19)),
    ("UnionPay", "81", (16,)),
    ("Maestro", "5018", (12, 13, 16, 19)),
    ("Maestro", "6759", (16, 18)),
    ("Mir", "2200", (16,)),
    ("Mir", "2204", (16,)),
    ("RuPay", "60", (16,)),
    ("RuPay", "508", (16,)),
    ("RuPay", "82", (16,)),
    ("Troy", "9792", (16,)),
    ("UATP", "1", (15,)),
    ("Verve", "5061", (16, 19)),
    ("Elo", "6362", (16,)),
    ("China T-Union", "31", (19,)),
    ("BORICA", "2205", (16,)),
    ("UzCard", "8600", (16,)),
    ("Humo", "9860", (16,)),
]
GROUPINGS: dict[int, list[tuple[int, ...]]] = {
    12: [(4, 4, 4)],
    13: [(4, 4, 5), (4, 4, 4, 1)],
    14: [(4, 6, 4), (4, 4, 4, 2)],
    15: [(4, 6, 5), (4, 4, 4, 3)],
    16: [(4, 4, 4, 4), (6, 10)],
    17: [(4, 4, 4, 4, 1)],
    18: [(4, 4, 4, 4, 2), (6, 12)],
    19: [(4, 4, 4, 4, 3), (6, 13)],
}


def with_check_digit(body: str) -> str:
    return next(body + digit for digit in "0123456789" if luhn(body + digit))


def grouped(digits: str, sizes: tuple[int, ...], separator: str) -> str:
    parts, at = [], 0
    for size in sizes:
        parts.append(digits[at : at + size])
        at += size
    return separator.join(parts)


@st.composite
def cards(draw: st.DrawFn) -> tuple[str, str]:
    network, prefix, lengths = draw(st.sampled_from(ISSUERS))
    length = draw(st.sampled_from(lengths))
    body = prefix + draw(st.text("0123456789", min_size=length - len(prefix) - 1, max_size=length - len(prefix) - 1))
    number = with_check_digit(body)
    separator = draw(st.sampled_from(["", " ", "-", "  ", "."]))  # doubled spaces: pasted from a PDF
    if not separator:
        sizes: tuple[int, ...] = (length,)
    elif separator == ".":  # dots part sixteen digits in fours
        sizes = (4, 4, 4, 4) if length == 16 else (length,)
    else:
        sizes = draw(st.sampled_from(GROUPINGS[length]))
    return network, grouped(number, sizes, separator)


@settings(max_examples=300, deadline=None)
@given(
    cards(),
    st.sampled_from(["Please charge {} today.", "{}", "Refund to {}, thanks", "Der Kunde nannte {} am Telefon."]),
)
async def test_every_issuers_numbers_in_any_common_grouping_are_cards(card: tuple[str, str], sentence: str) -> None:
    network, number = card
    outcome = await check_input(REDACT, sentence.format(number))
    assert outcome.prompt == sentence.format("[CREDIT_CARD]"), network


@settings(max_examples=200, deadline=None)
@given(cards())
async def test_a_wrong_check_digit_is_no_card(card: tuple[str, str]) -> None:
    _, number = card
    assume(not card_prefixes(number))  # else its first groups may be a card, followed by an expiry or a CVV
    last = number[-1]
    wrong = number[:-1] + str((int(last) + 1) % 10)
    outcome = await check_input({**REDACT, "entities": ["credit_card"]}, f"Please charge {wrong} today.")
    assert outcome.prompt == f"Please charge {wrong} today."
