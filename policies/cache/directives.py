"""What the client asks of the cache, read from the request headers.

- ``Cache-Control: no-cache`` (or ``x-portkey-cache-force-refresh: true``): skip the read, store
  the new answer (status REFRESH).
- ``Cache-Control: no-store``: neither read nor store (status BYPASS); it wins over everything else.
- ``Cache-Control: max-age=N``: accept only entries younger than N seconds (``max-age=0``: none).
- ``x-gateway-cache-namespace`` (or ``x-portkey-cache-namespace``): a partition of the caller's
  own entries; the canonical header wins when both are sent.

Other Cache-Control directives are ignored, as HTTP caches ignore the ones they do not implement.
A malformed value is a 400 `invalid_header` naming the header as ``param``, never quoting its value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from multidict import MultiMapping

from gateway.api.errors import InvalidRequest, invalid_header

CACHE_CONTROL = "Cache-Control"
FORCE_REFRESH = "x-portkey-cache-force-refresh"
NAMESPACE_HEADERS = ("x-gateway-cache-namespace", "x-portkey-cache-namespace")
MAX_NAMESPACE_CHARS = 256
MAX_AGE_CAP_S = 2**31  # RFC 9111 §1.2.2: a larger delta-seconds means "forever"
_MAX_AGE_DIGITS = len(str(MAX_AGE_CAP_S))  # longer is past the cap: never int() (Python refuses 4300 digits)


class CacheStatus(StrEnum):
    """The value of the `x-gateway-cache-status` response header."""

    HIT = "HIT"
    MISS = "MISS"
    REFRESH = "REFRESH"
    BYPASS = "BYPASS"


@dataclass(frozen=True, slots=True)
class CacheDirectives:
    read: bool = True  # may an entry answer this request
    store: bool = True  # may this request's answer be stored
    max_age_s: int | None = None  # accept only entries younger than this
    namespace: str | None = None

    @property
    def miss_status(self) -> CacheStatus:
        """The status of this request when no entry answers it."""
        if not self.store:
            return CacheStatus.BYPASS
        return CacheStatus.MISS if self.read else CacheStatus.REFRESH


def parse_cache_directives(headers: Mapping[str, str]) -> CacheDirectives:
    """Read the cache headers; `headers` must look names up case-insensitively (aiohttp's do)."""
    no_cache, no_store, max_age = _parse_cache_control(_values(headers, CACHE_CONTROL))
    if _force_refresh(headers.get(FORCE_REFRESH)):
        no_cache = True
    return CacheDirectives(
        read=not (no_cache or no_store),
        store=not no_store,
        max_age_s=max_age,
        namespace=_namespace(headers),
    )


def _values(headers: Mapping[str, str], name: str) -> list[str]:
    if isinstance(headers, MultiMapping):
        return list(headers.getall(name, []))
    value = headers.get(name)
    return [] if value is None else [value]


def _parse_cache_control(values: Iterable[str]) -> tuple[bool, bool, int | None]:
    no_cache = no_store = False
    max_age: int | None = None
    for value in values:
        for part in value.split(","):
            name, has_arg, arg = (s.strip() for s in part.partition("="))
            name = name.lower()
            if name in ("no-cache", "no-store"):
                if has_arg:
                    raise _invalid(CACHE_CONTROL, f"'{name}' takes no value")
                no_cache |= name == "no-cache"
                no_store |= name == "no-store"
            elif name == "max-age":
                seconds = _delta_seconds(arg if has_arg else "")
                max_age = seconds if max_age is None else min(max_age, seconds)
    return no_cache, no_store, max_age


def _delta_seconds(arg: str) -> int:
    text = arg[1:-1] if len(arg) >= 2 and arg[0] == arg[-1] == '"' else arg
    if not (text.isascii() and text.isdigit()):
        raise _invalid(CACHE_CONTROL, "max-age must be a non-negative whole number of seconds")
    digits = text.lstrip("0") or "0"
    return MAX_AGE_CAP_S if len(digits) > _MAX_AGE_DIGITS else min(int(digits), MAX_AGE_CAP_S)


def _force_refresh(value: str | None) -> bool:
    if value is None:
        return False
    flag = value.strip().lower()
    if flag not in ("true", "false"):
        raise _invalid(FORCE_REFRESH, "must be 'true' or 'false'")
    return flag == "true"


def _namespace(headers: Mapping[str, str]) -> str | None:
    for name in NAMESPACE_HEADERS:
        value = headers.get(name)
        if value is None or not value.strip():
            continue
        namespace = value.strip()
        if len(namespace) > MAX_NAMESPACE_CHARS:
            raise _invalid(name, f"must be at most {MAX_NAMESPACE_CHARS} characters, got {len(namespace)}")
        if not namespace.isprintable():
            raise _invalid(name, "must contain only printable characters")
        return namespace
    return None


def _invalid(header: str, detail: str) -> InvalidRequest:
    return invalid_header(header, detail)
