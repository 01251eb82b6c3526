"""Pydantic models of config.yaml: the operator's whole interface, every section closed to typos."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from gateway.config.key_policy import KeyPolicy, check_key_metadata
from gateway.config.observability import ObservabilityConfig
from gateway.config.policies import PolicyConfig
from gateway.config.routing import RoutingConfig
from policies.cache.policy import CacheSettings
from policies.limits.specs import LimitSpec, LimitsSettings, Price
from policies.redis_pool import SENTINEL_PORT, RedisTarget
from providers.base import Api

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:/@-]*$"
NAME_RULE = "must start with a letter or digit and hold only letters, digits and . _ : / @ -"
Name = Annotated[str, Field(min_length=1, max_length=128, pattern=NAME_PATTERN)]
REDIS_SCHEMES = ("redis://", "rediss://", "unix://")

# Fields holding credentials: they may only come from the environment and are never printed.
SECRET_FIELDS = frozenset({"api_key", "key", "sentinel_password"})
# Fernet keys that encrypt the virtual keys kept in Redis (`gateway.keys.vault`); never in the file.
ENCRYPTION_KEY_VARIABLE = "GATEWAY_ENCRYPTION_KEY"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


DEFAULT_BACKLOG = 2048  # gunicorn's and uvicorn's default


class ServerConfig(Strict):
    # The address to listen on; 0.0.0.0 for every interface (the Docker image does).
    host: str = "127.0.0.1"
    # The port to listen on; 0: any free port. `--port` and $GATEWAY_PORT override it.
    port: Annotated[int, Field(ge=0, le=65535)] = 8080
    # Processes sharing the port (SO_REUSEPORT), one per core; `--workers` overrides it.
    workers: Annotated[int, Field(ge=1, le=256)] = 1
    # Connections the kernel completes and holds for the gateway to accept, per worker: a burst of
    # new connections past it is dropped or reset. The kernel caps it at net.core.somaxconn.
    backlog: Annotated[int, Field(ge=1, le=65535)] = DEFAULT_BACKLOG
    # Larger request bodies are refused with 413 before they are read.
    max_body_bytes: Annotated[int, Field(ge=1024)] = 4 * 1024 * 1024
    # A request's headers must be whole this long after their first byte, and its body this long
    # after its headers; else 408 and the connection is closed (slow clients cannot hold it).
    header_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 10.0
    # A body not whole this long after the headers: 408, connection closed.
    body_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 30.0
    # At SIGTERM the listener closes and requests in flight get this long to finish; those still
    # running then end (a stream with an error event). Below Kubernetes' 30 s termination grace.
    shutdown_grace_s: Annotated[float, Field(ge=0, le=3600)] = 25.0


class RedisConfig(Strict):
    """One Redis (`url`), a Redis Cluster (`mode: cluster`, `url`: any node), or the master that
    Sentinel names (`mode: sentinel`, `sentinels`, `service_name`; `url`: only its credentials)."""

    # single: one server at `url`; cluster: any node of a Redis Cluster; sentinel: the master Sentinel names.
    mode: Literal["single", "cluster", "sentinel"] = "single"
    url: str = ""  # empty: no Redis, in-process state only (unless mode is sentinel)
    sentinels: list[Annotated[str, Field(min_length=1, max_length=255)]] = Field(default_factory=list)  # host:port
    service_name: Annotated[str, Field(max_length=128)] = ""  # the master's name in the Sentinels' config
    # The Sentinels' own credentials (their `requirepass` or ACL user); the master's are in `url`.
    sentinel_username: Annotated[str, Field(max_length=128)] = ""
    sentinel_password: SecretStr | None = None  # an environment reference
    prefix: Annotated[str, Field(max_length=64)] = "gateway:"  # for every key the gateway writes
    # Bound on each Redis call and connect of the request path (limits, keys, breakers): past it
    # Redis counts as down and `limits.on_redis_error` decides. A remote or TLS Redis needs more.
    timeout_s: Annotated[float, Field(gt=0, le=10)] = 0.25

    @field_validator("url")
    @classmethod
    def _known_scheme(cls, url: str) -> str:
        problem = redis_url_problem(url)
        if problem:
            raise ValueError(problem)
        return url

    @field_validator("sentinels")
    @classmethod
    def _addresses(cls, sentinels: list[str]) -> list[str]:
        for address in sentinels:
            sentinel_address(address)  # raises ValueError naming the entry
        return sentinels

    @model_validator(mode="after")
    def _mode_fits(self) -> RedisConfig:
        if self.mode == "sentinel":
            if not self.sentinels or not self.service_name:
                raise ValueError("mode 'sentinel' needs 'sentinels' (host:port of each) and 'service_name'")
            if self.url.startswith("unix://"):
                raise ValueError("mode 'sentinel': 'url' gives the master's credentials, not a unix socket")
        elif self.sentinels or self.service_name:
            raise ValueError("'sentinels' and 'service_name' apply to mode 'sentinel' only (set mode: sentinel)")
        if self.mode == "cluster":
            if not self.url:
                raise ValueError("mode 'cluster' needs 'url': any node of the cluster, e.g. redis://10.0.0.1:6379")
            if self.url.startswith("unix://") or urlsplit(self.url).path.strip("/") not in ("", "0"):
                raise ValueError("mode 'cluster': 'url' must be a redis:// or rediss:// node address, database 0")
            if "{" in self.prefix or "}" in self.prefix:
                raise ValueError("mode 'cluster': 'prefix' must hold no braces (they would put every key in one slot)")
        return self

    @model_validator(mode="after")
    def _sentinel_credentials(self) -> RedisConfig:
        given = [name for name in ("sentinel_username", "sentinel_password") if name in self.model_fields_set]
        if given and self.mode != "sentinel":
            raise ValueError(
                f"'{given[0]}' applies to mode 'sentinel' only (the Sentinels' own credentials; "
                "a Redis server's password goes in 'url')"
            )
        if self.sentinel_username and self.sentinel_password is None:
            raise ValueError("'sentinel_username' needs 'sentinel_password' (the ACL user's password, as ${ENV_VAR})")
        return self

    @property
    def enabled(self) -> bool:
        """Is Redis configured at all (else the gateway keeps its state in its own process)?"""
        return self.target().configured

    def target(self) -> RedisTarget:
        sentinels = tuple(sentinel_address(address) for address in self.sentinels)
        password = self.sentinel_password.get_secret_value() if self.sentinel_password is not None else ""
        return RedisTarget(
            url=self.url,
            mode=self.mode,
            sentinels=sentinels,
            service_name=self.service_name,
            sentinel_username=self.sentinel_username,
            sentinel_password=password,
        )


def sentinel_address(address: str) -> tuple[str, int]:
    """`host:port` (or `host`, port 26379; `[v6]:port`) as (host, port); ValueError if malformed."""
    host, _, port = address.rpartition(":") if address.count(":") == 1 or address.startswith("[") else ("", "", "")
    if not host:
        host, port = address, ""
    host = host.strip("[]")
    if not host or (port and not (port.isdigit() and 0 < int(port) < 65536)):
        raise ValueError(f"a sentinel address is host:port, e.g. 10.0.0.5:{SENTINEL_PORT} (got {address!r})")
    return host, int(port) if port else SENTINEL_PORT


def redis_url_problem(url: str) -> str | None:
    """What is wrong with a Redis URL (None: nothing), before redis-py fails on it."""
    if url and not url.startswith(REDIS_SCHEMES):
        return f"must start with {', '.join(REDIS_SCHEMES[:-1])} or {REDIS_SCHEMES[-1]} (e.g. redis://127.0.0.1:6379/0)"
    return None


class AdminConfig(Strict):
    key: SecretStr | None = None  # an environment reference; unset: the admin API is off
    key_cache_ttl_s: Annotated[float, Field(ge=0, le=300)] = 5.0  # how long a process trusts its view of a Redis key


class ClientKeyConfig(KeyPolicy):
    """A gateway API key: who may call, which deployments and virtual keys, how fast and how much."""

    # The key's name: in the access log, metrics, spend and the admin API (never its value).
    name: Name
    # The key's value, as an environment reference; unset: the key is disabled (start-up says so).
    key: SecretStr | None = None
    # Instead of `key`: the hex SHA-256 of the value (printf %s "$KEY" | sha256sum), so the file holds no secret.
    sha256: Annotated[str, Field(pattern=r"^[0-9a-fA-F]{64}$")] | None = None

    @field_validator("metadata")
    @classmethod
    def _bounded_metadata(cls, value: dict[str, str]) -> dict[str, str]:
        return check_key_metadata(value)

    @model_validator(mode="after")
    def _one_secret(self) -> ClientKeyConfig:
        if (self.key is None) == (self.sha256 is None):
            raise ValueError("give exactly one of 'key' (an environment reference) or 'sha256'")
        return self


class VirtualKeyConfig(Strict):
    """A named provider credential kept server-side; deployments refer to it by name."""

    # What deployments (`provider.virtual_key`) and callers (x-gateway-virtual-key) name it by.
    name: Name
    # The provider type the credential is for (a deployment's provider.type).
    provider: str
    # The provider credential, as an environment reference; never sent to clients.
    api_key: SecretStr


class ProviderSection(BaseModel):
    """The `provider:` block. `type` picks the backend; that backend's own model checks the rest."""

    model_config = ConfigDict(extra="allow", frozen=True)

    # The backend: openai, openai-chat, azure, anthropic, gemini, local or mock; the rest of the block is that type's
    # options.
    type: str

    @model_validator(mode="before")
    @classmethod
    def _hide_secrets(cls, data: Any) -> Any:
        # The type's own model checks these later; until then keep them out of repr() and logs.
        if isinstance(data, dict):
            return {k: SecretStr(v) if k in SECRET_FIELDS and isinstance(v, str) else v for k, v in data.items()}
        return data

    @property
    def options(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class DeploymentPrice(Price):
    """`price:` of a deployment: prices written out, or `auto: true` (`price: auto`) for the price
    catalogue's of its model (`gateway.config.price_catalogue`), or `auto: MODEL` for that model's;
    with `auto`, the prices written beside it win over the catalogue's, in every tier."""

    # true: the price catalogue's prices of the deployment's model; a string: of that catalogue model.
    auto: bool | Annotated[str, Field(min_length=1, max_length=256)] = False

    @property
    def written(self) -> dict[str, object]:
        """The prices the file sets (those that win over the catalogue's)."""
        return {name: getattr(self, name) for name in self.model_fields_set if name != "auto"}


class DeploymentConfig(Strict):
    # What clients send as `model` (or in x-gateway-deployment); unique.
    name: Name
    aliases: list[Name] = Field(default_factory=list)  # shared by several deployments: a group
    # Labels that x-gateway-tags selects deployments by.
    tags: list[Name] = Field(default_factory=list)
    # The backend and its options (see the provider types).
    provider: ProviderSection
    # Per upstream attempt, until the answer (or, streamed, each event) arrives.
    timeout_s: Annotated[float, Field(gt=0, le=3600)] = 60.0
    # Share of traffic under the weighted strategy, among deployments of one alias.
    weight: Annotated[float, Field(gt=0, le=1_000_000)] = 1.0
    priority: int = 0  # the `priority` strategy tries lower numbers first
    retries: Annotated[int, Field(ge=0, le=10)] | None = None  # default: routing.retries
    fallbacks: list[str] = Field(default_factory=list)  # deployment names or aliases, in order
    policies: list[Name] = Field(default_factory=list)  # names under `policies:`, the first cache block applies
    limits: LimitSpec = Field(default_factory=LimitSpec)  # for all callers together, across replicas
    price: DeploymentPrice | None = None  # USD per million tokens (or `auto`), for cost and budgets
    # The client APIs it serves, narrowing what its provider serves natively; unset: all of those.
    apis: Annotated[list[Api], Field(min_length=1)] | None = None

    @field_validator("price", mode="before")
    @classmethod
    def _auto_price(cls, value: Any) -> Any:
        if value == "auto":
            return {"auto": True}
        if isinstance(value, str):
            raise ValueError(
                "'price' is 'auto' (the price catalogue's for the deployment's model) or a mapping of "
                f"prices per million tokens ({{prompt_per_1m, completion_per_1m, ...}}); got {value!r}"
            )
        return value


class ResponsesSettings(Strict):
    """`responses:`: where stored Responses API answers live (Redis when configured, else memory)."""

    retention_s: Annotated[int, Field(ge=60, le=366 * 86400)] = 30 * 86400  # OpenAI keeps 30 days
    max_memory_entries: Annotated[int, Field(ge=1, le=1_000_000)] = 10_000  # without Redis: oldest go first
    memory_max_bytes: Annotated[int, Field(ge=1024, le=2**40)] = 64 * 2**20  # without Redis: their encoded size


class GatewayConfig(Strict):
    # Where and how the gateway listens.
    server: ServerConfig = Field(default_factory=ServerConfig)
    # Shared state for replicas and workers: keys, limits, budgets, spend, cache, stored responses.
    redis: RedisConfig = Field(default_factory=RedisConfig)
    # The admin API (and console) and its key.
    admin: AdminConfig = Field(default_factory=AdminConfig)
    # How rate limits and budgets behave when Redis fails.
    limits: LimitsSettings = Field(default_factory=LimitsSettings)
    # Who may call: API keys with their deployments, limits and budgets. None at all: every caller is accepted.
    keys: list[ClientKeyConfig] = Field(default_factory=list)
    # Provider credentials kept server-side, named by deployments and callers.
    virtual_keys: list[VirtualKeyConfig] = Field(default_factory=list)
    # The models the gateway serves, each a backend with its routing and policies.
    deployments: list[DeploymentConfig] = Field(default_factory=list)
    # Strategy, retries, backoff, circuit breakers, groups and config reload.
    routing: RoutingConfig = Field(default_factory=RoutingConfig)
    cache: CacheSettings = Field(default_factory=CacheSettings)  # the backends every cache policy shares
    responses: ResponsesSettings = Field(default_factory=ResponsesSettings)  # stored /v1/responses answers
    # Named bundles of cache and guardrail settings that deployments list.
    policies: dict[Name, PolicyConfig] = Field(default_factory=dict)
    # Metrics, dashboard, access log, tracing, spend and caller metadata.
    observability: ObservabilityConfig = Field(default_factory=ObservabilityConfig)

    @field_validator("deployments")
    @classmethod
    def _unambiguous_names(cls, deployments: list[DeploymentConfig]) -> list[DeploymentConfig]:
        names: set[str] = set()
        for deployment in deployments:
            if deployment.name in names:
                raise ValueError(f"the deployment name {deployment.name!r} is used twice")
            names.add(deployment.name)
        for deployment in deployments:
            clashes = sorted(names.intersection(deployment.aliases))
            if clashes:
                raise ValueError(
                    f"deployment {deployment.name!r} has the alias {clashes[0]!r}, which is another deployment's "
                    "name (an alias may be shared by several deployments, a name may not)"
                )
        return deployments

    @field_validator("keys", "virtual_keys")
    @classmethod
    def _unique_names(cls, entries: list[Any]) -> list[Any]:
        names = [entry.name for entry in entries]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"names must be unique; repeated: {', '.join(duplicates)}")
        return entries


ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
