"""The request headers the gateway reads: checked once, before anything uses them, and kept out of logs.

aiohttp decodes header bytes as UTF-8 with `surrogateescape`, so a byte that is not UTF-8 arrives as
a lone surrogate that fails wherever the value is later encoded (hashed, logged, put in JSON). Every
header the gateway reads must therefore be UTF-8 text without control characters (a tab aside):
otherwise a 400 `invalid_header` naming the header, never quoting its value (it may be a key).
`x-request-id` is not checked here: an invalid one is replaced by a fresh id, as documented.
"""

from __future__ import annotations

import traceback
import unicodedata
from collections.abc import Iterable

from multidict import CIMultiDictProxy

from gateway.api.credentials import API_KEY_HEADERS
from gateway.api.errors import invalid_header
from gateway.http.handlers import REFRESH_HEADERS
from gateway.http.metadata import METADATA_HEADERS
from gateway.keys.access import ADMIN_KEY_HEADER
from gateway.keys.virtual import VIRTUAL_KEY_HEADERS
from gateway.routing.plan import DEPLOYMENT_HEADERS, TAGS_HEADERS
from policies.cache.directives import CACHE_CONTROL, FORCE_REFRESH, NAMESPACE_HEADERS

# How each header is named in an error's `param` (lower-case key: aiohttp's names are case-insensitive).
READ_HEADERS: dict[str, str] = {
    name.lower(): name
    for name in (
        "Authorization",
        *API_KEY_HEADERS,
        ADMIN_KEY_HEADER,
        *VIRTUAL_KEY_HEADERS,
        *DEPLOYMENT_HEADERS,
        *TAGS_HEADERS,
        *REFRESH_HEADERS,
        CACHE_CONTROL,
        FORCE_REFRESH,
        *NAMESPACE_HEADERS,
        *METADATA_HEADERS,
    )
}

_MIN_REDACTED_CHARS = 6  # shorter values ("true", "false") would blank out unrelated text
REDACTED = "[redacted]"


def check_headers(headers: CIMultiDictProxy[str]) -> None:
    """400 `invalid_header` for the first header the gateway reads whose value is not clean text."""
    every = "".join(headers.values())
    if every.isascii() and every.isprintable():
        return  # the common case: every value clean, decided in C in one pass
    for name, value in headers.items():
        if value.isascii() and value.isprintable():
            continue  # the common case, decided in C
        shown = READ_HEADERS.get(name.lower())
        if shown is None:
            continue  # never read: aiohttp's parser has already refused what HTTP forbids
        problem = _problem(value)
        if problem:
            raise invalid_header(shown, problem)


def _problem(value: str) -> str | None:
    try:
        value.encode()
    except UnicodeEncodeError:
        return "its value is not valid UTF-8"
    if any(char != "\t" and unicodedata.category(char) == "Cc" for char in value):
        return "its value holds control characters"
    return None


def redact(text: str, headers: Iterable[tuple[str, str]]) -> str:
    """`text` (a traceback, say) with every value of these headers, and each word of it, replaced."""
    secrets: set[str] = set()
    for _, value in headers:
        for part in (value, value.strip(), *value.split()):
            if len(part) >= _MIN_REDACTED_CHARS:
                secrets.add(part)
                secrets.add(repr(part)[1:-1])  # as a repr() or an exception message would show it
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text


def exception_summary(exc: BaseException) -> str:
    """The exception's type and frames, and those of its causes, without any message: a message may
    quote request data (aiohttp's parser errors quote the offending header line)."""
    parts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        kind = type(current)
        frames = "".join(traceback.format_tb(current.__traceback__))
        parts.append(f"Traceback (most recent call last):\n{frames}{kind.__module__}.{kind.__qualname__}")
        current = current.__cause__ or current.__context__
    return "\n\nwhile handling:\n".join(reversed(parts)) + " (message withheld: it may quote the request)"
