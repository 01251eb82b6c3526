"""The `pii` check on labels written in any script and on labels that name a register: a naming word
of Chinese, Japanese, Korean, Thai, Cyrillic, Arabic, Hebrew or Devanagari text beside a noun of its
own names that thing's number, a phone word of those scripts says phone, an owner names no other
thing; an acronym in capitals names a register; a label or sticker names what it is stuck on."""

# ruff: noqa: RUF001  (the full-width colon is how these scripts write one)
from __future__ import annotations

import pytest

from tests.support.guardrail_helpers import check_input

REDACT = {"check": "pii", "action": "redact"}


@pytest.mark.parametrize(
    "text",
    [
        "会員番号 045-2231-7780 をご確認ください。",  # Japanese: a member's number
        "请提供订单号：186 2231 7780",  # Chinese: an order's
        "주문번호 010-2231-7780 확인 부탁드립니다",  # Korean: an order's
        "고객 번호 010-2231-7780",  # Korean, the noun written apart
        "เลขที่ใบแจ้งหนี้ 081 223 1778",  # Thai: an invoice's
        "Номер договора 8 (495) 223-17-78",  # Russian: a contract's
        "رقم الفاتورة 0502231778",  # Arabic: an invoice's
        "מספר לקוח 050-223-1778",  # Hebrew: a customer's
        "बिल संख्या 98450 17263",  # Hindi: a bill's
    ],
)
async def test_a_number_a_label_of_another_script_names_stays(text: str) -> None:
    assert (await check_input(REDACT, text)).prompt == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("電話番号 045-2231-7780", "電話番号 [PHONE]"),  # the label says phone
        ("私の番号は090-1234-5678です", "私の番号は[PHONE]です"),  # an owner, not a thing
        ("我的号码是186 2231 7780", "我的号码是[PHONE]"),
        ("제 번호는 010-2231-7780", "제 번호는 [PHONE]"),
        ("전화번호 02-2231-7780", "전화번호 [PHONE]"),
        ("מספר טלפון 050-223-1778", "מספר טלפון [PHONE]"),
        ("رقم الهاتف 0502231778", "رقم الهاتف [PHONE]"),  # a phone word of the script, an unseparated run
        ("电话：0755 2231 7780", "电话：[PHONE]"),
    ],
)
async def test_a_phone_its_scripts_words_call_one_is_found(text: str, expected: str) -> None:
    assert (await check_input(REDACT, text)).prompt == expected


@pytest.mark.parametrize(
    "text",
    [
        "DUNS 08-441-2297 for the supplier form",  # registers named by their acronyms
        "SIREN 612 081 317, greffe de Lyon",
        "ABN 0412 889 310 on the invoice",
        "The crate sticker reads 88 4471 2290.",  # what a label is stuck on
        "Locker 0412 7719 is free again.",
        "Print job 55 0172 3391 failed.",
        "Address line 2: Apt 7, Denver CO 80202-3311",  # a form's line, not a phone line
    ],
)
async def test_a_register_a_label_or_a_locker_names_its_number(text: str) -> None:
    assert (await check_input(REDACT, text)).prompt == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("NYC 212-555-0199", "NYC [PHONE]"),  # a city's acronym before a North American number
        ("TEL 020 7946 0321", "TEL [PHONE]"),  # a phone's own acronym
        ("Oficina CDMX: 55 4120 9981", "Oficina CDMX: [PHONE]"),  # an office says phone
    ],
)
async def test_acronyms_that_name_no_register_leave_phones_found(text: str, expected: str) -> None:
    assert (await check_input(REDACT, text)).prompt == expected


@pytest.mark.parametrize(
    "text",
    [
        "ИНН 5024117788, ОГРН 1157746114478",  # Cyrillic acronyms in capitals name registers
        "ИНН банка 7744001188",  # ... and the words after them say whose
        "ΑΦΜ 099114478, ΔΟΥ Αθηνών",  # a Greek one
        "ЄДРПОУ 21144788",
    ],
)
async def test_a_register_named_by_an_acronym_of_another_script_stays(text: str) -> None:
    assert (await check_input(REDACT, text)).prompt == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("如有疑問請致電3114 4788。", "如有疑問請致電[PHONE]。"),  # Chinese: verbs of calling, no space
        ("欢迎拨打138 1144 7788咨询", "欢迎拨打[PHONE]咨询"),
        ("ТЕЛ 495 114-47-88", "ТЕЛ [PHONE]"),  # a phone's acronym is no register's
        ("加我Signal 6114 4788，谢谢", "加我Signal [PHONE]，谢谢"),  # a Latin word written against CJK text
        ("サーバーは10.20.114.78です", "サーバーは[IP_ADDRESS]です"),  # an address against Japanese text
        ("접속 IP 203.0.114.78에서 시도", "접속 IP [IP_ADDRESS]에서 시도"),  # and Korean
    ],
)
async def test_phones_and_addresses_written_against_other_scripts_are_found(text: str, expected: str) -> None:
    assert (await check_input(REDACT, text)).prompt == expected
