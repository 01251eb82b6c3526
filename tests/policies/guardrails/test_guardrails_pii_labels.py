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


@pytest.mark.parametrize(
    "text",
    [
        "Crate: 0161 496 0734 goes to the loading bay.",  # things handled and shipped carry numbers
        "Skid 020 7946 0611 was wrapped twice.",
        "Fahrgestell: 0171 4471 8823",
        "Lotto 02 8870 1144 del magazzino nord",
        "Expediente: 0914 882 117",
        "Kundenkonto 0711 8823 114",  # a compound: what its last part says (konto)
        "Tilausnumero 040 8823 114",  # Finnish: a compound ending in numero
        "Číslo zakázky 604 882 311",  # Czech: the naming word first, its noun after
        "Rendelésszám: 06 20 882 3114",  # Hungarian: a compound ending in szám
    ],
)
async def test_a_number_labelled_as_a_things_in_many_languages_stays(text: str) -> None:
    assert (await check_input(REDACT, text)).prompt == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Zavolejte nám na 608 112 447.", "Zavolejte nám na [PHONE]."),  # verbs of calling: Czech
        ("Hívjon minket: 06 30 112 4478", "Hívjon minket: [PHONE]"),  # Hungarian
        ("Soita meille 040 112 4478", "Soita meille [PHONE]"),  # Finnish
        ("Hubungi kami di 0812 1144 7788", "Hubungi kami di [PHONE]"),  # Indonesian
        ("Oslo-kontoret: 22 11 44 78", "Oslo-kontoret: [PHONE]"),  # Norwegian, the office with its article
        ("Servicetelefon 030 1144778", "Servicetelefon [PHONE]"),  # a compound whose head says phone
        ("Telefonszám: 06 30 114 4778", "Telefonszám: [PHONE]"),
    ],
)
async def test_a_phone_a_word_of_another_language_calls_one_is_found(text: str, expected: str) -> None:
    assert (await check_input(REDACT, text)).prompt == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Astrid Holm 38 11 44 78", "Astrid Holm [PHONE]"),  # Denmark's 2-2-2-2, after a name
        ("Kontakt: Siri Berg, 91 14 47 88", "Kontakt: Siri Berg, [PHONE]"),  # Norway's
        ("Tan Mei Hua\n9114 4788", "Tan Mei Hua\n[PHONE]"),  # Singapore's 4-4, a name on the line above
    ],
)
async def test_a_number_after_a_persons_name_in_a_regions_format_is_a_phone(text: str, expected: str) -> None:
    assert (await check_input(REDACT, text)).prompt == expected


@pytest.mark.parametrize(
    "text",
    [
        "Table 38 11 44 78 shows the yearly figures.",  # one capitalised word: no name
        "Meeting Room 9114 4788",  # words that name a thing
        "the Blue Lagoon 38 11 44 78",  # not opening a line or a clause
    ],
)
async def test_capitalised_words_that_are_no_name_leave_the_number(text: str) -> None:
    assert (await check_input(REDACT, text)).prompt == text
