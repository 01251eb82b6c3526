"""The `pii` check on numbers digits alone leave ambiguous: national phone formats, extensions, bare
digits with a keyword, 12-digit Maestro, SSNs without dashes, letter-heavy IBANs; and the look-alikes
context settles (versions, ISBNs and order numbers that pass Luhn, suite numbers, dates)."""

from __future__ import annotations

import pytest

from policies.guardrails.checks.pii.context import card_issued, context, phone_strength, words_before
from tests.support.guardrail_helpers import check_input

REDACT = {"check": "pii", "action": "redact"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Call me at 020 7946 0958 today", "Call me at [PHONE] today"),  # UK, trunk 0
        ("Her mobile is 07700 900123.", "Her mobile is [PHONE]."),
        ("Büro: 030 12345678, bitte", "Büro: [PHONE], bitte"),  # Germany
        ("Fax 089/12345678 attn. billing", "Fax [PHONE] attn. billing"),
        ("Tel. 06.12.34.56.78", "Tel. [PHONE]"),  # France
        ("ring (02) 9876 5432 please", "ring [PHONE] please"),  # Australia
        ("Phone: 03-1234-5678", "Phone: [PHONE]"),  # Japan
        ("Phone: 415-555-0199x570 (desk)", "Phone: [PHONE] (desk)"),  # extension inside the span
        ("reach me on (415)555-0199 ext. 22.", "reach me on [PHONE]."),
        ("Call 001-415-555-0199 from abroad", "Call [PHONE] from abroad"),
        ("contact number 4155550199", "contact number [PHONE]"),  # bare digits, said to be a phone
        ("For bookings ring (11) 95220-7067.", "For bookings ring [PHONE]."),  # Brazil, with a keyword
    ],
)
async def test_phones_in_national_formats_with_extensions_and_bare(text: str, expected: str) -> None:
    outcome = await check_input(REDACT, text)
    assert outcome.prompt == expected


@pytest.mark.parametrize(
    ("text", "expected", "entity"),
    [
        ("card 501853713151 exp 04/27", "card [CREDIT_CARD] exp 04/27", "credit_card"),  # 12-digit Maestro
        ("My SSN is 886 14 9634.", "My SSN is [SSN].", "ssn"),
        ("social security number: 583625527", "social security number: [SSN]", "ssn"),
        ("IBAN: CH43 4199 1ZHB 6LN4 KFMQ Y now", "IBAN: [IBAN] now", "iban"),
        ("export HF_TOKEN=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", "export HF_TOKEN=[SECRET]", "secret"),
    ],
)
async def test_entities_digits_alone_missed(text: str, expected: str, entity: str) -> None:
    outcome = await check_input(REDACT, text)
    assert outcome.prompt == expected
    assert outcome.verdicts[0].labels == (entity,)


@pytest.mark.parametrize(
    "text",
    [
        "Please upgrade to version 4.18.18.71 before Friday.",  # an IPv4 shape
        "We run v10.2.0.1 in production.",
        "Installed package foo==4.18.18.71",
        "Order the textbook with ISBN 9780306406157.",  # passes Luhn; 978 is no card issuer
        "Your order number is 4532015112830366.",  # passes Luhn, a Visa prefix: the words say order
        "Invoice 5105105105105100 is overdue.",
        "Deliver to Suite 448-7939 on the fifth floor.",
        "Our office: 200 Park Ave, Suite 564 647-7939",
        "Room 212-555-0101 is booked.",
        "Due 06.12.2025, paid on 2024-03-15",
        "Logged at 1715995201 (unix time).",  # bare digits, nothing says phone
        "The population is 123 456 789.",
        "Case number 123-45-6789 is pending.",  # an SSN shape
        "Section 1.2.3.4 covers refunds.",
        "UPC 036000291452 on the box",
    ],
)
async def test_lookalikes_are_left_alone(text: str) -> None:
    outcome = await check_input(REDACT, text)
    assert outcome.prompt == text, outcome.verdicts


def test_the_nearest_decisive_keyword_decides() -> None:
    def verdict(text: str, entity: str) -> str:
        return context(words_before(text.lower(), len(text)), entity)  # the check reads folded text

    assert verdict("Order questions? Call ", "phone") == "positive"
    assert verdict("Call me about order ", "phone") == "negative"
    assert verdict("The number is ", "phone") == "neutral"  # "number" alone decides nothing
    assert verdict("My SSN is ", "phone") == "negative"  # the words name another entity
    assert verdict("Social security number: ", "ssn") == "positive"
    assert verdict("Lovely weather, ", "phone") == "none"


def test_card_issuers_and_phone_shapes() -> None:
    assert card_issued("4111111111111111")
    assert card_issued("501853713151")  # Maestro, 12 digits
    assert not card_issued("9780306406157")  # an ISBN
    assert not card_issued("411111111111")  # Visa issues no 12-digit numbers
    assert phone_strength("+44 20 7946 0958") == "strong"
    assert phone_strength("(415) 555-0199") == "strong"
    assert phone_strength("020 7946 0958") == "strong"
    assert phone_strength("4155550199") == "weak"
    assert phone_strength("06.12.2025") == "date"
