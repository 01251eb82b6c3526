"""The `pii` check on phone-shaped numbers that what stands around them names as something else: a
labelled identifier (``customer number``, ``asset tag``, ``numéro client``), a postal code of its
region's layout, a calling code with no number of its length, a quantity with its unit, the tail of
a code in spaced groups (a UPS number) or of a longer run, a quad after words about versions; and the
phones beside such words that must stay found."""

from __future__ import annotations

import pytest

from tests.support.guardrail_helpers import check_input

REDACT = {"check": "pii", "action": "redact"}


@pytest.mark.parametrize(
    "text",
    [
        "Customer number 204 771 3390, please keep it for your records.",
        "Gym badge no. 7741 2208 19 is deactivated.",
        "Asset tag 0031 6625 9048 is on the docking station.",
        "Numéro client 0081 2275 904 à rappeler dans vos courriers.",
        "Número de socio 33 120 4418.",
        "Inventarnummer 0049 3318 2271, Raum 1.07",
        "Kit # 882 0144 9371 arrived damaged.",
    ],
)
async def test_a_number_labelled_as_another_things_identifier_stays(text: str) -> None:
    assert (await check_input(REDACT, text)).prompt == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Customer service number 020 7946 0321.", "Customer service number [PHONE]."),  # a phone's role
        ("Customer hotline number 020 7946 0321.", "Customer hotline number [PHONE]."),  # a phone word
        ("Dana's number is 020 7946 0321.", "Dana's number is [PHONE]."),  # someone's number
        ("My Leeds number is 0113 496 0522.", "My Leeds number is [PHONE]."),
        ("Mijn nummer: 06 49450934", "Mijn nummer: [PHONE]"),
        ("Numéro de téléphone : 06 12 44 81 90", "Numéro de téléphone : [PHONE]"),
        ("Meine Telefonnummer ist 030 901820.", "Meine Telefonnummer ist [PHONE]."),
        ("Handynummer 0151 23456789", "Handynummer [PHONE]"),
    ],
)
async def test_a_phone_beside_a_naming_word_that_names_no_other_thing_is_found(text: str, expected: str) -> None:
    assert (await check_input(REDACT, text)).prompt == expected


@pytest.mark.parametrize(
    "text",
    [
        "Entrega: CEP 04538-133, São Paulo.",  # Brazil, with its postal word
        "Itaim Bibi, São Paulo - SP, 04538-133",  # Brazil, after the state
        "2300 N Lincoln Ave, Chicago, IL 60614-2290",  # the US, after the state
        "〒150-0041 東京都渋谷区神南1-2-3",  # Japan, after its postal mark
        "Código postal 1250-096 Lisboa",  # Portugal
    ],
)
async def test_a_postal_code_in_its_regions_layout_stays(text: str) -> None:
    assert (await check_input(REDACT, text)).prompt == text


async def test_a_brazilian_mobile_in_a_postal_codes_layout_is_found_when_called() -> None:
    assert (await check_input(REDACT, "Me liga no 96123-4507.")).prompt == "Me liga no [PHONE]."


@pytest.mark.parametrize(
    "text",
    [
        "Consumption this quarter: 0431 2297 kWh.",  # a unit after; and 00-less
        "Reading on the dial: 0045 1182.",  # Denmark's numbers have eight digits, not four
        "Parcel 1Z 7Y4 88A 03 4410 2291 arrives today.",  # a UPS number's last groups
        "Quote Q-88213-2025 expires on Friday.",  # a letter prefix
        "Scanned 882 0123 4567 at the door.",  # the tail of a longer run of groups
        "Bumped the dependency to 10.2.7.1 yesterday.",  # a version of the private 10/8 range's shape
    ],
)
async def test_a_number_its_neighbours_refute_stays(text: str) -> None:
    assert (await check_input(REDACT, text)).prompt == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Tel. 0045 3318 2271", "Tel. [PHONE]"),  # a Danish number after the 00 exit code
        ("Call +33 (0)4 26 07 30 91 today", "Call [PHONE] today"),  # a (0) after the calling code
        ("Upgrade the agent on host 10.2.7.1.", "Upgrade the agent on host [IP_ADDRESS]."),
        ("Tel-0612 345 678", "Tel-[PHONE]"),  # a phone word, not a code's prefix
        ("Open 9am 020 7946 0321", "Open 9am [PHONE]"),  # a clock time is no code
    ],
)
async def test_phones_and_addresses_beside_such_neighbours_are_found(text: str, expected: str) -> None:
    assert (await check_input(REDACT, text)).prompt == expected


@pytest.mark.parametrize(
    "text",
    ["Call (212) 555-0187 for the front desk.", "Ring 555-0143 after six.", "Phone: +1 415 555 0192"],
)
async def test_the_fictional_555_range_is_a_phone(text: str) -> None:
    # Films and examples use it, and a redactor cannot tell a fictional number from a real one.
    assert "[PHONE]" in (await check_input(REDACT, text)).prompt
