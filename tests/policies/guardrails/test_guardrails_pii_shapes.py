"""The `pii` check on numbers that are phone-shaped but show by their layout or neighbours that they
are not phones (dates, decimals, round amounts, draws, prices, parts of longer numbers or of codes),
and on mobiles written in no national format or with no word saying so (libphonenumber's mobile
ranges of the policy's regions, the trunk prefix where the region always writes it)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.guardrail_helpers import check_input

REDACT = {"check": "pii", "action": "redact"}


@pytest.mark.parametrize(
    "text",
    [
        "Call about the dates 03 04 2025 and 17 04 2025.",  # a date with spaces
        "Experiment run 2024-0415-0932-17 produced the plots.",  # a year, then a month: a stamp
        "The number 641.5945 is on the spine.",  # one dot: a decimal (Dewey)
        "Market cap 3 100 000 000 000 this year.",  # groups of zeros: a round amount
        "Phone them: 9400 1000 0000 0000 0000 00",  # a tracking number's fillers
        "Numbers: 07 14 22 35 41 48.",  # small numbers rising: a draw
        "The jackpot is 415 555 0199 yen this week.",  # a currency after
        "The jackpot is ¥ 415 555 0199 this week.",  # a currency before
        "See 9205 5901 6491 7312 7510 89 in the app.",  # more digits than a phone has: a tracking number
        "Serial no. 7C1B-48213-9902 on the lid.",  # joined to a code of letters and digits
        "PO 4500123987 covers the replacement parts.",  # a purchase order
    ],
)
async def test_a_phone_shape_its_layout_refutes_stays(text: str) -> None:
    assert (await check_input(REDACT, text)).prompt == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Lead: Sam Ortiz 5037942427 wants a demo", "Lead: Sam Ortiz [PHONE] wants a demo"),  # US, one run
        ("Aarav Sharma 9813152150 Pune", "Aarav Sharma [PHONE] Pune"),  # India, no trunk 0
        ("Le client a laissé 0648847676.", "Le client a laissé [PHONE]."),  # France, trunk 0
        ("Please add Javier (612 155 224) to the chat.", "Please add Javier ([PHONE]) to the chat."),  # Spain 3-3-3
        ("我的手机号是138 9627 4624。", "我的手机号是[PHONE]。"),  # China, 3-4-4
        # after NANP's trunk 1-, the rest
        ("From overseas, dial 1-617-555-0142 and press 2.", "From overseas, dial 1-[PHONE] and press 2."),
    ],
)
async def test_a_mobile_in_no_national_format_is_a_phone_without_a_keyword(text: str, expected: str) -> None:
    assert (await check_input(REDACT, text)).prompt == expected


async def test_a_mobile_range_without_the_trunk_prefix_its_region_always_writes_is_no_phone() -> None:
    # 171 … is a German mobile only as 0171 …; written bare, it is a count or a Unix time.
    unix_time = "Logged at 1715995201 (unix time)."
    assert (await check_input(REDACT, unix_time)).prompt == unix_time
    assert (await check_input(REDACT, "Jan 01715995201")).prompt == "Jan [PHONE]"


async def test_a_mobile_with_a_word_that_names_something_else_stays() -> None:
    text = "Order number 5037942427 shipped."
    assert (await check_input(REDACT, text)).prompt == text


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 59), min_size=5, max_size=7, unique=True), st.sampled_from([" ", "-"]))
async def test_a_draw_of_rising_small_numbers_is_never_a_phone(numbers: list[int], separator: str) -> None:
    text = f"Tonight's numbers {separator.join(f'{n:02d}' for n in sorted(numbers))}, good luck."
    assert (await check_input(REDACT, text)).prompt == text


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 28), st.integers(1, 12), st.integers(1900, 2099), st.sampled_from([" ", ".", "/", "-"]))
async def test_a_date_is_never_a_phone(day: int, month: int, year: int, separator: str) -> None:
    day_first = f"{day:02d}{separator}{month:02d}{separator}{year}"
    for date in (day_first, f"{year}{separator}{month:02d}{separator}{day:02d}"):
        text = f"Call me about it, date {date}."
        assert (await check_input(REDACT, text)).prompt == text


@pytest.mark.parametrize(
    "text",
    [
        "Phone: 0000000000 until the customer sends theirs.",  # one digit repeated
        "Tel. 1111 111 111 (dummy)",
        "Mobile 0123456789 is the form's example.",  # the digits in a row
        "Fax 9876 543 210",  # ... down
        "Planck's constant is 6.626 070 15 \u00d7 10^-34 J s.",  # a decimal's fraction, a power of ten
        "Boltzmann 1.380 649 e-23",
        "Priority claimed from application 2019-114478.",  # a year serial
        "Az. 2022/447788 des Verwaltungsgerichts",
    ],
)
async def test_placeholders_decimals_and_year_serials_are_no_phones(text: str) -> None:
    assert (await check_input(REDACT, text)).prompt == text
