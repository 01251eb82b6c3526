"""The in-process tier: never holds more bytes than allowed, evicts the least recently used,
forgets expired entries."""

from __future__ import annotations

from collections import OrderedDict

from hypothesis import given
from hypothesis import strategies as st

from policies.cache import CacheEntry, MemoryCache
from policies.cache.entry import ENTRY_OVERHEAD_BYTES
from tests.support.fake_clock import FakeClock


def entry(size: int, *, created_at: float = 1000.0, ttl_s: float = 60.0) -> CacheEntry:
    """An entry whose `nbytes` is exactly `size` (the body is filler: the tier never parses it)."""
    return CacheEntry(body=b"x" * (size - ENTRY_OVERHEAD_BYTES), created_at=created_at, expires_at=created_at + ttl_s)


def test_least_recently_used_is_evicted_first() -> None:
    cache = MemoryCache(max_bytes=3000, clock=FakeClock())
    for key in "abc":
        assert cache.put_now(key, entry(1000))
    assert cache.get_now("a") is not None  # a is now the most recently used
    cache.put_now("d", entry(1000))
    assert "b" not in cache
    assert all(key in cache for key in "acd")
    assert cache.nbytes == 3000
    assert cache.evictions == 1


def test_a_large_entry_evicts_as_many_as_needed_and_an_oversized_one_is_refused() -> None:
    cache = MemoryCache(max_bytes=3000, clock=FakeClock())
    for key in "abc":
        cache.put_now(key, entry(1000))
    assert cache.put_now("big", entry(2500))
    assert list(cache._entries) == ["big"]
    assert not cache.put_now("huge", entry(3001))
    assert "huge" not in cache
    assert cache.nbytes == 2500


def test_replacing_a_key_does_not_count_it_twice() -> None:
    cache = MemoryCache(max_bytes=3000, clock=FakeClock())
    cache.put_now("a", entry(1000))
    cache.put_now("a", entry(1500))
    assert cache.nbytes == 1500
    assert len(cache) == 1


def test_entries_expire_at_their_ttl() -> None:
    clock = FakeClock()
    cache = MemoryCache(max_bytes=10_000, clock=clock)
    cache.put_now("a", entry(500, ttl_s=10))
    clock.now += 9.9
    assert cache.get_now("a") is not None
    clock.now += 0.1
    assert cache.get_now("a") is None
    assert cache.nbytes == 0
    assert len(cache) == 0


def test_an_already_expired_entry_is_not_stored() -> None:
    cache = MemoryCache(max_bytes=10_000, clock=FakeClock(2000.0))
    assert not cache.put_now("old", entry(500, created_at=1000.0, ttl_s=60))
    assert len(cache) == 0


async def test_async_interface_matches() -> None:
    cache = MemoryCache(max_bytes=10_000, clock=FakeClock())
    assert await cache.put("a", entry(500))
    assert await cache.get("a") == entry(500)
    await cache.delete("a")
    assert await cache.get("a") is None


operations = st.lists(
    st.tuples(st.sampled_from(["put", "get"]), st.sampled_from("abcdef"), st.integers(ENTRY_OVERHEAD_BYTES, 1200)),
    max_size=60,
)


@given(ops=operations)
def test_behaves_like_a_reference_lru_within_its_byte_bound(ops: list[tuple[str, str, int]]) -> None:
    cache = MemoryCache(max_bytes=2500, clock=FakeClock())
    model: OrderedDict[str, int] = OrderedDict()
    for op, key, size in ops:
        if op == "put":
            model.pop(key, None)
            while sum(model.values()) + size > 2500:
                model.popitem(last=False)
            model[key] = size
            cache.put_now(key, entry(size))
        else:
            found = cache.get_now(key)
            assert (found.nbytes if found else None) == model.get(key)
            if key in model:
                model.move_to_end(key)
        assert cache.nbytes == sum(model.values()) <= 2500
        assert list(cache._entries) == list(model)


def test_a_write_drops_the_expired_entries_nobody_reads_again() -> None:
    """A stream of one-off requests: their entries expire unread, and must not hold memory until
    the byte bound forces them out."""
    clock = FakeClock(1000.0)
    cache = MemoryCache(max_bytes=1_000_000, clock=clock)
    for number in range(5):
        cache.put_now(f"old-{number}", entry(1000, created_at=1000.0, ttl_s=10))
    clock.now = 1011.0  # every old entry expired, none was read again
    cache.put_now("new", entry(1000, created_at=1011.0, ttl_s=10))

    assert list(cache._entries) == ["new"]
    assert cache.nbytes == 1000
    assert cache.evictions == 0  # expiry, not eviction for room
