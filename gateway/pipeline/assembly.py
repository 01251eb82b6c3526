"""Build a serving pipeline from a loaded config, reusing the providers of the previous one.

State that must survive a config reload (circuit breakers, load and latency stats, routing
counters, the Redis client, the response cache) lives in `SharedState`; everything the config
decides is rebuilt.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from gateway.config.loader import LoadedConfig, ResolvedDeployment
from gateway.config.policies import PolicyConfig, cache_policy
from gateway.keys.known_secrets import KnownSecrets, ScrubbingKeyDirectory
from gateway.keys.records import records_from_config
from gateway.keys.store import RedisKeyStore
from gateway.keys.vault import Vault
from gateway.keys.virtual import VirtualKeys
from gateway.keys.virtual_store import RedisVirtualKeyStore
from gateway.pipeline.admission import DeploymentLimits, Gatekeeper
from gateway.pipeline.flow import Pipeline
from gateway.pipeline.guarding import close_webhook_sessions, guards_for
from gateway.pipeline.responses.store import MemoryResponses, RedisResponses, ResponseStore
from gateway.pipeline.responses.writer import RedisWriter
from gateway.routing.attempts import AttemptRunner, Timing
from gateway.routing.breaker import CircuitBreakers, LocalBreakerStore, RedisBreakerStore
from gateway.routing.deployments import UNAVAILABLE, Deployment, StatsBoard, Unavailable
from gateway.routing.events import RoutingEvents
from gateway.routing.plan import Router
from gateway.routing.virtual_providers import Fingerprint, VirtualProviders, create_provider, fingerprint
from policies.cache import ResponseCache, TieredCache
from policies.limits.factory import memory_limits, redis_limits
from policies.limits.service import Limits
from policies.limits.specs import FREE
from policies.redis_pool import RedisClient, bounded_client
from providers.base import APIS, Api, Provider, apis_of, native_apis_of

_BREAKER_TTL_S = 24 * 3600


@dataclass(slots=True)
class SharedState:
    breakers: CircuitBreakers
    stats: StatsBoard = field(default_factory=StatsBoard)
    events: RoutingEvents = field(default_factory=RoutingEvents)
    timing: Timing = field(default_factory=Timing)
    redis: RedisClient | None = None
    # One per app, so entries outlive config reloads; its settings (`cache:`) apply at start-up.
    cache: ResponseCache = field(default_factory=lambda: ResponseCache(TieredCache()))
    # Keys and provider credentials kept in Redis, the limits' counters (`limits:` applies at start-up).
    key_store: RedisKeyStore | None = None
    virtual_store: RedisVirtualKeyStore | None = None
    limits: Limits = field(default_factory=memory_limits)
    virtual_providers: VirtualProviders = field(default_factory=VirtualProviders)
    # Stored /v1/responses answers (`responses:`): in Redis when configured, else this process's memory.
    responses: ResponseStore = field(default_factory=lambda: MemoryResponses(30 * 86400, 10_000, 64 * 2**20))

    @classmethod
    def create(cls, loaded: LoadedConfig, timing: Timing) -> SharedState:
        config = loaded.config
        client = None
        store: LocalBreakerStore | RedisBreakerStore = LocalBreakerStore()
        if config.redis.enabled:
            # Request-path calls fail fast (`redis.timeout_s`): the limits then do as `on_redis_error`
            # says, the breaker acts on its last view. A bounded, blocking pool: a burst waits its turn.
            timeout_s = config.redis.timeout_s
            client = bounded_client(config.redis.target(), socket_timeout=timeout_s, socket_connect_timeout=timeout_s)
            store = RedisBreakerStore(client, f"{config.redis.prefix}breaker:", _BREAKER_TTL_S)
        events = RoutingEvents()
        breakers = CircuitBreakers(config.routing.breaker, store, clock=timing.wall, on_transition=events.transition)
        cache = ResponseCache.from_settings(config.cache, config.redis.target(), config.redis.prefix)
        shared = cls(breakers=breakers, events=events, timing=timing, redis=client, cache=cache)
        kept = config.responses
        shared.responses = MemoryResponses(kept.retention_s, kept.max_memory_entries, kept.memory_max_bytes)
        if client is None:
            shared.limits = memory_limits(config.limits)
        else:
            prefix = config.redis.prefix
            shared.key_store = RedisKeyStore(client, prefix, cache_ttl_s=config.admin.key_cache_ttl_s)
            shared.virtual_store = RedisVirtualKeyStore(client, prefix, Vault.from_env(os.environ))
            shared.limits = redis_limits(client, prefix, config.limits)
            writer = RedisWriter.of(config.redis.target(), config.redis.timeout_s)
            shared.responses = RedisResponses(client, prefix, kept.retention_s, writer)
        return shared

    async def aclose(self) -> None:
        await close_webhook_sessions()  # each webhook check's own pool
        await self.virtual_providers.aclose()
        await self.cache.aclose()
        self.responses.close()
        if self.redis is not None:
            await self.redis.aclose()


@dataclass(slots=True)
class Generation:
    """One config's pipeline, and the providers it uses (shared with other generations when unchanged)."""

    loaded: LoadedConfig
    pipeline: Pipeline
    providers: dict[Fingerprint, Provider]
    in_flight: int = 0
    retired: bool = False


def build_generation(loaded: LoadedConfig, shared: SharedState, reusable: dict[Fingerprint, Provider]) -> Generation:
    providers: dict[Fingerprint, Provider] = {}
    deployments: dict[str, Deployment] = {}
    default_retries = loaded.config.routing.retries
    for name, resolved in loaded.deployments.items():
        provider = None
        if resolved.unavailable is None:
            key = fingerprint(resolved, resolved.credential)
            provider = reusable.get(key) or create_provider(resolved, resolved.credential)
            providers[key] = provider
        deployments[name] = _deployment(resolved, provider, default_retries, loaded.config.policies)
    shared.breakers.config = loaded.config.routing.breaker
    router = Router(deployments, loaded.config.routing, {d.name: d.aliases for d in loaded.config.deployments})
    runner = AttemptRunner(loaded.config.routing, shared.breakers, shared.stats, shared.events, shared.timing)
    pipeline = Pipeline(
        _gatekeeper(loaded, shared),
        router,
        deployments,
        runner,
        shared.cache,
        lambda deployment, credential: shared.virtual_providers.get(loaded.deployments[deployment.name], credential),
    )
    return Generation(loaded, pipeline, providers)


def _gatekeeper(loaded: LoadedConfig, shared: SharedState) -> Gatekeeper:
    config = loaded.config
    secrets = KnownSecrets(loaded, shared.virtual_providers.learnt)  # for the scrubber of upstream failures
    records = records_from_config(loaded.client_keys)
    keys = ScrubbingKeyDirectory(records, shared.key_store, required=loaded.auth_required, secrets=secrets)
    configured = [vk for vk in config.virtual_keys if vk.api_key.get_secret_value()]  # unset variable: disabled
    virtual = VirtualKeys(configured, shared.virtual_store, cache_ttl_s=config.admin.key_cache_ttl_s)
    limits = {name: DeploymentLimits(d.config.limits, d.price or FREE) for name, d in loaded.deployments.items()}
    return Gatekeeper(keys, virtual, shared.limits, limits)


def _deployment(
    resolved: ResolvedDeployment, provider: Provider | None, default_retries: int, policies: dict[str, PolicyConfig]
) -> Deployment:
    config = resolved.config
    return Deployment(
        name=config.name,
        provider_type=config.provider.type,
        timeout_s=config.timeout_s,
        provider=provider,
        unavailable=_unavailable(resolved),
        tags=frozenset(config.tags),
        weight=config.weight,
        priority=config.priority,
        retries=default_retries if config.retries is None else config.retries,
        fallbacks=tuple(config.fallbacks),
        cache=cache_policy(config.policies, policies),
        guards=guards_for(config.policies, policies),
        apis=_apis(config.apis, provider),
        apis_narrowed=_apis(config.apis, provider) != _apis(None, provider),
        native_apis=native_apis_of(provider),
    )


def _apis(configured: list[Api] | None, provider: Provider | None) -> frozenset[Api]:
    """What the provider serves, narrowed by the deployment's `apis`. Without a provider (it cannot
    serve at all) only the setting counts: routing reports why it cannot serve, not the API."""
    served = APIS if provider is None else apis_of(provider)
    return served if configured is None else served & frozenset(configured)


def _unavailable(resolved: ResolvedDeployment) -> Unavailable | None:
    """Why the loader left it without a provider, in words that name the variable to set (never its value)."""
    if resolved.unavailable is None:
        return None
    virtual_key = getattr(resolved.options, "virtual_key", None)
    variable = resolved.missing_variable
    if variable is None:  # the loader gave only its own sentence
        return Unavailable(UNAVAILABLE, resolved.unavailable, "Check the gateway's start-up log.")
    return Unavailable.credential_unset(variable, virtual_key if isinstance(virtual_key, str) else None)
