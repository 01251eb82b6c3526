"""Cache request headers and the cache policy block: what the client and operator control."""

from __future__ import annotations

import pytest
from multidict import CIMultiDict
from pydantic import ValidationError

from gateway.api.errors import InvalidRequest
from policies.cache import CacheDirectives, CachePolicy, CacheSettings, CacheStatus, parse_cache_directives

MISS, REFRESH, BYPASS = CacheStatus.MISS, CacheStatus.REFRESH, CacheStatus.BYPASS


def parse(*pairs: tuple[str, str]) -> CacheDirectives:
    return parse_cache_directives(CIMultiDict(pairs))


@pytest.mark.parametrize(
    ("headers", "read", "store", "status"),
    [
        ([], True, True, MISS),
        ([("Cache-Control", "no-cache")], False, True, REFRESH),
        ([("cache-control", "No-Cache")], False, True, REFRESH),
        ([("Cache-Control", "no-store")], False, False, BYPASS),
        ([("Cache-Control", "no-cache, no-store")], False, False, BYPASS),
        ([("Cache-Control", "no-cache"), ("Cache-Control", "no-store")], False, False, BYPASS),
        ([("x-portkey-cache-force-refresh", "true")], False, True, REFRESH),
        ([("X-Portkey-Cache-Force-Refresh", " TRUE ")], False, True, REFRESH),
        ([("x-portkey-cache-force-refresh", "false")], True, True, MISS),
        ([("x-portkey-cache-force-refresh", "true"), ("Cache-Control", "no-store")], False, False, BYPASS),
        ([("Cache-Control", "max-age=60, no-transform, private")], True, True, MISS),
    ],
)
def test_read_and_store_follow_the_headers(
    headers: list[tuple[str, str]], read: bool, store: bool, status: CacheStatus
) -> None:
    directives = parse(*headers)
    assert (directives.read, directives.store, directives.miss_status) == (read, store, status)


@pytest.mark.parametrize(
    ("value", "max_age"),
    [
        ("max-age=0", 0),
        ("max-age=30", 30),
        ('max-age="30"', 30),
        ("MAX-AGE = 30", 30),
        ("max-age=50, max-age=20", 20),
        ("max-age=99999999999999999999", 2**31),
        ("no-cache", None),
    ],
)
def test_max_age(value: str, max_age: int | None) -> None:
    assert parse(("Cache-Control", value)).max_age_s == max_age


@pytest.mark.parametrize(
    ("header", "value"),
    [
        ("Cache-Control", "max-age=abc"),
        ("Cache-Control", "max-age=-1"),
        ("Cache-Control", "max-age=1.5"),
        ("Cache-Control", "max-age"),
        ("Cache-Control", "max-age="),
        ("Cache-Control", "no-store=yes"),
        ("x-portkey-cache-force-refresh", "yes"),
        ("x-portkey-cache-force-refresh", ""),
        ("x-gateway-cache-namespace", "n" * 257),
    ],
)
def test_malformed_headers_are_a_400_naming_the_header(header: str, value: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse((header, value))
    assert caught.value.status == 400
    assert caught.value.param == header
    assert header in caught.value.message


def test_namespace_canonical_header_wins_over_the_portkey_alias() -> None:
    assert parse(("x-portkey-cache-namespace", "alias")).namespace == "alias"
    assert parse(("X-Gateway-Cache-Namespace", " mine "), ("x-portkey-cache-namespace", "alias")).namespace == "mine"
    assert parse(("x-gateway-cache-namespace", "   ")).namespace is None
    assert parse().namespace is None


def test_plain_dict_headers_are_accepted() -> None:
    directives = parse_cache_directives({"Cache-Control": "no-cache", "x-gateway-cache-namespace": "ns"})
    assert (directives.read, directives.namespace) == (False, "ns")


def test_a_cache_block_turns_caching_on_with_documented_defaults() -> None:
    policy = CachePolicy.model_validate({"ttl_s": 600})
    assert policy.enabled
    assert policy.cache_nonzero_temperature
    assert policy.redis
    assert policy.ttl_s == 600
    assert policy.max_entry_bytes == 1024 * 1024
    assert CacheSettings().redis_timeout_ms <= 20


@pytest.mark.parametrize(
    "block",
    [{"ttl": 600}, {"ttl_s": 0}, {"ttl_s": -5}, {"max_entry_bytes": 0}, {"enabled": "sometimes"}],
)
def test_operator_typos_and_bad_values_are_rejected(block: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        CachePolicy.model_validate(block)


def test_settings_reject_unknown_keys_and_policies_are_frozen() -> None:
    with pytest.raises(ValidationError):
        CacheSettings.model_validate({"memory_bytes": 10})
    with pytest.raises(ValidationError):
        CachePolicy().ttl_s = 5  # type: ignore[misc]
