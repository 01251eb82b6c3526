"""PII and secret shapes, their validators, and the cheap views that find where to look.

Every pattern runs on folded (lower-case) text and is linear: no nested unbounded repeats, and
each starts where a one-character look-behind says a token starts. Scanning 2 KB with a dozen
`re` patterns costs hundreds of microseconds (`re` pays ~15 ns per position per pattern), so the
detectors first find *where* an entity could be with C-speed operations (`bytes.translate`,
`str.find`, a literal-prefixed regex over a translated view) and run the real pattern only there.
"""

from __future__ import annotations

import math
import re
from collections import Counter

DIGIT_PATTERNS: dict[str, re.Pattern[str]] = {
    # 12 to 19 digits, grouped by single or double spaces or dashes, or in dotted groups of four.
    "credit_card": re.compile(
        r"(?<![0-9a-z_.+-])(?:\d{4}(?:\.\d{4}){2}\.\d{2,7}|\d(?:(?: {1,2}|-)?\d){11,18})(?![0-9a-z_-]|\.\d)"
    ),
    "ssn": re.compile(r"(?<![\w-])(?!000|666|9)\d{3}([ -]?)(?!00)\d{2}\1(?!0000)\d{4}(?![\w-])"),
    "phone": re.compile(
        r"(?<![0-9a-z_+])(?:\+\d{1,3}(?:[ .-]?(?:\(\d{1,4}\)|\d{1,5})){1,6}"  # +44 20 7946 0958, +1-415-555-0199
        r"|\((?:\d{2,5}|\d{1,3}[ -]\d{1,3})\)[ .-]?\d{2,5}(?:[ .-]?\d{2,5}){0,3}"  # (415) 555-0199, (11) 95220-7067
        # ... and a trunk prefix apart from the area code inside the brackets: (06 1) 234 5678, (8-5) 212 3456
        r"|\d{2,6}(?:[ .\-/]\d{2,8}){1,5}"  # 415-555-0199, 001-415-555-0199, 06.12.34.56.78, 089/12345678
        r"|\d{7,13})"  # 4155550199
        r"(?:[ \t]?(?:x|ext\.?|extension|#)[ \t]?\d{1,6})?"  # an extension: x570, ext. 22
        r"(?![0-9a-z_-]|\.\d)"  # ASCII word edges: CJK text writes no space around a number
    ),
    "iban": re.compile(r"(?<!\w)[a-z]{2}\d{2}(?: ?[a-z0-9]{4}){2,7}(?: ?[a-z0-9]{1,3})?(?!\w)"),
    # ASCII word edges, as for phones: Chinese, Japanese and Korean write no space around an address.
    "ipv4": re.compile(
        r"(?<![0-9a-z_.])(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
        r"(?![0-9a-z_]|\.\d)"
    ),
}
EMAIL_DOMAIN = re.compile(rb"(?:[\w-]{1,63}\.){1,8}[a-z]{2,24}(?![\w-])")  # matched right after the '@'
EMAIL_LOCAL_MAX = 64
IPV6 = re.compile(r"(?<![\w:.])(?:[0-9a-f]{0,4}:){2,7}(?:(?:\d{1,3}\.){3}\d{1,3}|[0-9a-f]{1,4})?(?![\w:])")
SECRET_PREFIXES: dict[str, re.Pattern[str]] = {
    prefix: re.compile(re.escape(prefix) + body)
    for prefix, body in {
        "sk-": r"[\w-]{20,200}",  # OpenAI (sk-, sk-proj-), Anthropic (sk-ant-)
        "sk_live_": r"[a-z0-9]{16,200}",  # Stripe
        "sk_test_": r"[a-z0-9]{16,200}",
        "rk_live_": r"[a-z0-9]{16,200}",
        "ghp_": r"[a-z0-9]{36}",  # GitHub tokens
        "gho_": r"[a-z0-9]{36}",
        "ghs_": r"[a-z0-9]{36}",
        "github_pat_": r"\w{22,255}",
        "glpat-": r"[\w-]{20,64}",  # GitLab
        "xoxb-": r"[\w-]{15,200}",  # Slack
        "xoxp-": r"[\w-]{15,200}",
        "akia": r"[a-z0-9]{16}",  # AWS access key id
        "aiza": r"[\w-]{35}",  # Google API key
        "hf_": r"[a-z]{30,64}",  # Hugging Face
        "eyj": r"[\w-]{10,2000}\.eyj[\w-]{10,2000}\.[\w-]{10,2000}",  # JWT
    }.items()
}
B64_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789+/=_-"
MIN_KEYED = 20  # the shortest prefixed key (AWS: akia + 16); English words this long are rare
MIN_TOKEN = 32  # unprefixed tokens: judged by entropy (PEM key bodies are caught line by line)
MAX_TOKEN = 512

# Views: one byte per folded character (non-ASCII becomes '?', so offsets stay aligned).
DIGIT_VIEW = bytes(48 if chr(i).isdigit() else 46 if i == 46 else 49 if chr(i) in " -()+/" else 120 for i in range(256))
TOKEN_VIEW = bytes(97 if chr(i) in B64_CHARS else 32 for i in range(256))
EMAIL_LOCAL_VIEW = bytes(i if chr(i) in "abcdefghijklmnopqrstuvwxyz0123456789_.%+-" else 32 for i in range(256))
HEX_VIEW = bytes(104 if chr(i) in "0123456789abcdef" else 58 if i == 58 else 32 for i in range(256))
DIGIT_RUN = re.compile(rb"0(?:[1.]{0,3}0){3,}")  # >= 4 digits close together: literal-prefixed, so fast
GROUP_START = re.compile(rb"(?<!0)0")  # the first digit of each group, on the digit view
IBAN_HEAD = b"xx00"  # an IBAN's country code and check digits, on the digit view
IBAN_HEAD_AFTER_SPACE = b" xx00"
COLONS = re.compile(rb":h{0,4}:")
LONG_RUN = b"a" * MIN_KEYED


def luhn(digits: str) -> bool:
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = ord(char) - 48
        if position % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def iban_valid(compact: str) -> bool:
    """ISO 13616 check digits: move the first four characters to the end, letters to 10..35, mod 97 == 1."""
    if not 15 <= len(compact) <= 34 or not compact[:2].isalpha() or not compact[2:4].isdigit():
        return False
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(c, 36)) for c in rearranged)) % 97 == 1


def entropy(token: str) -> float:
    """Shannon entropy in bits per character."""
    size = len(token)
    return -sum(n / size * math.log2(n / size) for n in Counter(token).values())


_NOT_DIGITS = {ord(c): None for c in " -.()+/"}
GROUP_SEPARATORS = frozenset(" .-")  # a digit beyond one or two of these is another group of the same run


def group_before(text: str, at: int) -> bool:
    """Does another group of digits end just before `at` (one or two separators between)?"""
    window = text[at - 3 if at > 3 else 0 : at]
    kept = window.rstrip(" .-")
    return kept != window and kept[-1:].isdigit()


def group_after(text: str, end: int) -> bool:
    """Does another group of digits start just after `end`?"""
    window = text[end : end + 3]
    kept = window.lstrip(" .-")
    return kept != window and kept[:1].isdigit()


CARD_GROUP_END = re.compile(r"(?<=\d)[ .-]+(?=\d)")  # where a card number's groups end
EXTENSION = re.compile(r"[ \t]?(?:x|ext\.?|extension|#)[ \t]?\d{1,6}$")


def digits_of(text: str) -> str:
    return text.translate(_NOT_DIGITS)


_DIGIT_GROUPS = re.compile(r"\d+")
# How cards are printed: in fours (13 digits: 4-4-5; 19: 4-4-4-4-3), Amex's 4-6-5, Diners' 4-6-4,
# UATP's 4-5-6, UnionPay's 6-13 and its kin; or as one run of digits.
_CARD_LAYOUTS = frozenset(
    {(4, 4, 4), (4, 4, 5), (4, 4, 4, 4), (4, 4, 4, 4, 3), (4, 6, 5), (4, 6, 4), (4, 5, 6), (6, 10), (6, 12), (6, 13)}
)


_CARD_RUN = (12, 19)  # the digits of a card written as one run


def card_layout(value: str) -> bool:
    """Is `value` one run of digits, or grouped as cards are printed (those layouts, or fours from the
    left with a shorter last group)? A number grouped otherwise (``50 1004 1288 1244``, ``501 004 128``)
    is a card only where a word says so."""
    if value.isdigit():
        return True
    sizes = tuple(map(len, _DIGIT_GROUPS.findall(value)))
    if sizes in _CARD_LAYOUTS:
        return True
    return all(size == 4 for size in sizes[:-1]) and sizes[-1] <= 4


def card_prefixes(value: str) -> list[str]:
    """The first groups of `value` that are grouped as a card is printed, longest first (none when
    `value` is itself so grouped); or its first group, where that is a whole card's run of digits and
    what follows is another number (``5295…2198 07/26``: an expiry)."""
    run = _DIGIT_GROUPS.match(value)
    first = run.end() if run is not None else 0
    if _CARD_RUN[0] <= first < len(value) and first <= _CARD_RUN[1]:
        return [value[:first]]
    if value[4:5] not in GROUP_SEPARATORS and value[6:7] not in GROUP_SEPARATORS:
        return []  # a card is printed from a group of four or six
    sizes = tuple(len(group) for group in _DIGIT_GROUPS.findall(value))
    if len(sizes) == 1 or sizes in _CARD_LAYOUTS or sizes[0] not in (4, 6):
        return []
    groups = list(CARD_GROUP_END.finditer(value))
    return [value[: groups[n - 1].start()] for n in range(len(sizes) - 1, 1, -1) if sizes[:n] in _CARD_LAYOUTS]


def iban_match(candidate: str) -> str | None:
    """The longest valid IBAN prefix of a match, trimming groups the greedy pattern took from the next word."""
    groups = candidate.split(" ")
    while groups:
        compact = "".join(groups)
        if iban_valid(compact):
            return " ".join(groups)
        if len(groups) == 1:
            return None
        groups.pop()
    return None
