"""Exact-match response cache: tenant-scoped keys, memory and Redis tiers, stream assembly and
replay (and native Messages answers kept as they came: `native_events`), single-flight coalescing
(one shared live stream for identical streamed requests).
The pipeline uses `ResponseCache` (see `response_cache`)."""

from policies.cache.assemble import StreamAssembler
from policies.cache.backend import CacheBackend
from policies.cache.broadcast import Abandoned, SharedStream, Subscription
from policies.cache.coalesce import SingleFlight
from policies.cache.directives import CacheDirectives, CacheStatus, parse_cache_directives
from policies.cache.entry import CacheEntry, CorruptEntry, decode_entry, encode_entry, make_entry
from policies.cache.key import KEY_FORMAT_VERSION, cache_key, expected_choices, may_cache
from policies.cache.memory import MemoryCache
from policies.cache.policy import CachePolicy, CacheSettings
from policies.cache.redis_tier import RedisCache
from policies.cache.replay import replay_chunks
from policies.cache.response_cache import BYPASS, CacheLookup, CachePlan, Filled, ResponseCache
from policies.cache.tiers import TieredCache

__all__ = [
    "BYPASS",
    "KEY_FORMAT_VERSION",
    "Abandoned",
    "CacheBackend",
    "CacheDirectives",
    "CacheEntry",
    "CacheLookup",
    "CachePlan",
    "CachePolicy",
    "CacheSettings",
    "CacheStatus",
    "CorruptEntry",
    "Filled",
    "MemoryCache",
    "RedisCache",
    "ResponseCache",
    "SharedStream",
    "SingleFlight",
    "StreamAssembler",
    "Subscription",
    "TieredCache",
    "cache_key",
    "decode_entry",
    "encode_entry",
    "expected_choices",
    "make_entry",
    "may_cache",
    "parse_cache_directives",
    "replay_chunks",
]
