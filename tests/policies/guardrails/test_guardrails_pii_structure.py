"""The `pii` check on what a number's own structure says: a dotted quad is an address unless words name
it a version or a section (a page, a name server, a lookup, a port after it leave it one); colon-hex in
byte pairs is a serial, not an IPv6 address; two clock times joined by a dash are opening hours; a code
of spaced groups begins or ends with letters and digits; a number grouped as no card is printed, or
after words for a bank account, is no card."""

from __future__ import annotations

import pytest

from tests.support.guardrail_helpers import check_input

REDACT = {"check": "pii", "action": "redact"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The status page is at 192.168.7.1", "The status page is at [IP_ADDRESS]"),  # a page's words name no quad
        ("nameserver 9.9.9.9", "nameserver [IP_ADDRESS]"),  # a word ending in "server"
        ("Accepted key from 5.6.200.1 port 22", "Accepted key from [IP_ADDRESS] port 22"),  # a port after
        ("Proxy at 4.11.8.60:3128 is down", "Proxy at [IP_ADDRESS]:3128 is down"),
        ("whois 4.2.2.2 says Colorado", "whois [IP_ADDRESS] says Colorado"),
        ("ping fe80::1c2b:3aff:fe4d:9e01", "ping [IP_ADDRESS]"),
    ],
)
async def test_addresses_in_their_usual_words_are_found(text: str, expected: str) -> None:
    assert (await check_input(REDACT, text)).prompt == expected


@pytest.mark.parametrize(
    "text",
    [
        "Chapter 2.10.4.8 of the handbook.",  # a section
        "Upgraded the firmware from 3.4.12.7 to 3.5.0.1.",  # versions
        "Serial 0a:1b:2c:3d:4e:5f:60:71 on the certificate.",  # byte pairs: a serial
        "Port WWN 20:00:00:25:b5:aa:00:1f is zoned.",  # a Fibre Channel name
    ],
)
async def test_quads_and_byte_strings_that_name_no_address_stay(text: str) -> None:
    assert (await check_input(REDACT, text)).prompt == text


@pytest.mark.parametrize(
    "text",
    [
        "Shop open 0930-1800 daily, office hours 0800-1630.",  # clock times on the five minutes
        "It says PC 013 445 21 R0077 on the sign.",  # a code's first groups, then letters and digits
        "Here it is: 8B 310 884 2290 1",  # a code's last groups after a short digit-and-letter group
        "A/C 4532 0151 1283 0366, IFSC SBIN0001234",  # a bank account, though it passes Luhn
        "Try 45 3201 5112 8303 66 again",  # grouped as no card is printed
    ],
)
async def test_hours_codes_and_accounts_stay(text: str) -> None:
    assert (await check_input(REDACT, text)).prompt == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Tel 0912-3456", "Tel [PHONE]"),  # 56 is no time on the five minutes
        ("Card 4532 0151 1283 0366 please", "Card [CREDIT_CARD] please"),
        ("Charge 4532 015112 830366", "Charge [CREDIT_CARD]"),  # an odd grouping, but a word says card
    ],
)
async def test_phones_and_cards_beside_those_shapes_are_found(text: str, expected: str) -> None:
    assert (await check_input(REDACT, text)).prompt == expected


@pytest.mark.parametrize(
    "text",
    [
        "ip netmask 255.255.255.128",  # a netmask: 240.0.0.0/4, where no host is numbered
        "Subnetzmaske 255.255.252.0 für das Gäste-WLAN",
        "OSPF network statement with wildcard 0.0.15.255",  # a wildcard mask: 0.0.0.0/8
        "router ospf 1 area 0.0.0.2",  # an OSPF area
        "Broadcast 255.255.255.255",
        "Checklist item 24.1.3.2 is done.",  # numbered parts of a document or a plan
        "Test case 30.10.44.7 passes again.",
        "See requirement 10.3.2.1 of the standard.",
        "根据第10.2.3.1条的规定",  # Chinese: an article, marked around the number
    ],
)
async def test_masks_reserved_blocks_and_numbered_parts_are_no_addresses(text: str) -> None:
    assert (await check_input(REDACT, text)).prompt == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Server 11.4.2.3 is down.", "Server [IP_ADDRESS] is down."),
        ("cc 5105105105105100 11/27", "cc [CREDIT_CARD] 11/27"),  # a card as one run, then its expiry
        ("Hívjon a (06 1) 114 4788 számon.", "Hívjon a [PHONE] számon."),  # trunk and area code in brackets
        ("Tel. (8-5) 211 4478", "Tel. [PHONE]"),
    ],
)
async def test_addresses_cards_and_phones_beside_those_shapes_are_found(text: str, expected: str) -> None:
    assert (await check_input(REDACT, text)).prompt == expected


# Round 4: how a number is introduced (a label form) decides, not which words the label holds. The labels
# below are made-up words no list of the check holds.
@pytest.mark.parametrize(
    "text",
    [
        "Frobnitz glorp: 020 7946 0958",  # a phrase and a colon before a London number's digits
        "quuxen: 020 7946 0958",
        "zorblat = 020 7946 0958",
        '"flumox": "020 7946 0958"',  # a JSON key
        "Обращенко № 020 7946 0958",  # № folds to "no": the separator, not a label owning the number
        "Zorblat\t020 7946 0958",  # one capitalised word keeps a phone only with a colon
        "The counter wrapped at 2147483647.",  # an integer limit
        "Reference: RF18 5390 0754 7034",  # an ISO 11649 creditor reference, no IBAN
    ],
)
async def test_a_label_form_names_its_number_whatever_its_words(text: str) -> None:
    assert (await check_input(REDACT, text)).prompt == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Frobnitz: +44 20 7946 0958", "Frobnitz: [PHONE]"),  # an international prefix
        ("Hamburg: 040 81567803", "Hamburg: [PHONE]"),  # a place, in its region's exact format
        ("M: 07733 530757", "M: [PHONE]"),  # a phone word abbreviated
        ("Call me on 020 7946 0958", "Call me on [PHONE]"),  # a sentence, no label form
    ],
)
async def test_a_label_form_with_phone_evidence_keeps_the_phone(text: str, expected: str) -> None:
    assert (await check_input(REDACT, text)).prompt == expected
