"""Read config.yaml: YAML, `${VAR}` / `${VAR:-default}` interpolation, validation, secret checks.

Every problem is reported at once, one line each, named by its YAML path. A secret whose
environment variable is unset never fails the load: what it belongs to is disabled and a warning
names the variable (a deployment answers 503, a key is refused, the admin API is off, /metrics is
closed) while everything else keeps serving. Values that came from the environment are never
echoed in a message.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, SecretStr, ValidationError

from gateway.api.credentials import ADMIN_KEY_MIN_LENGTH, admin_key_weakness
from gateway.config.cross_checks import policy_warnings
from gateway.config.observability import metrics_local_only
from gateway.config.problems import describe
from gateway.config.references import dangling_references
from gateway.config.request_log import url_password_literal
from gateway.config.settings import (
    ENCRYPTION_KEY_VARIABLE,
    ENV_REFERENCE,
    SECRET_FIELDS,
    ClientKeyConfig,
    DeploymentConfig,
    GatewayConfig,
)
from gateway.config.yaml_source import parse_yaml
from policies.limits.specs import Price
from providers.registry import PROVIDER_TYPES

_PURE_REFERENCE = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-)?\}$")
# Where an unset variable only disables what it belongs to, instead of failing the load.
_OPTIONAL_SECRETS = (
    re.compile(r"^deployments\[\d+\]\.provider\.api_key$"),
    re.compile(r"^virtual_keys\[\d+\]\.api_key$"),
    re.compile(r"^keys\[\d+\]\.key$"),
    re.compile(r"^admin\.key$"),
    re.compile(r"^admin\.viewer_keys\[\d+\]\.key$"),
    re.compile(r"^observability\.metrics\.key$"),
    re.compile(r"^redis\.sentinel_password$"),
)


class ConfigError(Exception):
    def __init__(self, source: str, problems: list[str]) -> None:
        super().__init__(f"{source}: {len(problems)} problem(s)")
        self.source = source
        self.problems = problems

    def report(self) -> str:
        lines = [f"{self.source}: invalid configuration ({len(self.problems)} problem(s))"]
        lines += [f"  - {problem}" for problem in self.problems]
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class ResolvedDeployment:
    config: DeploymentConfig
    options: BaseModel  # the provider type's validated options
    credential: str | None = field(repr=False)
    unavailable: str | None = None  # why it cannot serve (a missing secret), logged at start-up
    missing_variable: str | None = None  # the unset environment variable behind `unavailable` (its name only)
    price: Price | None = None  # what its answers cost: as written, or the catalogue's (`price: auto`)
    price_source: str = ""  # where a catalogue price came from (check-config says)


@dataclass(frozen=True, slots=True)
class LoadedConfig:
    config: GatewayConfig
    deployments: dict[str, ResolvedDeployment]
    client_keys: list[ClientKeyConfig]  # those whose secret is present
    source: str = "config.yaml"
    warnings: list[str] = field(default_factory=list)
    disabled_keys: dict[str, str] = field(default_factory=dict)  # config keys without a value -> the unset variable

    @property
    def auth_required(self) -> bool:
        """Keys were configured (even if none is usable), or an admin key was (even if its variable is
        unset: keys may be in Redis already): never fall back to an open gateway."""
        return bool(self.config.keys) or self.config.admin.key is not None

    @property
    def admin_enabled(self) -> bool:
        key = self.config.admin.key
        return key is not None and bool(key.get_secret_value())

    @property
    def viewer_keys(self) -> dict[str, SecretStr]:
        """The read-only keys that may be used: name -> value (those unset or too weak are off, with a warning)."""
        return {
            viewer.name: viewer.key
            for viewer in self.config.admin.viewer_keys
            if viewer.key.get_secret_value() and admin_key_weakness(viewer.key.get_secret_value()) is None
        }


@dataclass
class _Interpolation:
    env: Mapping[str, str]
    missing: dict[str, str] = field(default_factory=dict)  # YAML path -> unset variable
    from_env: set[str] = field(default_factory=set)  # YAML paths whose value came from the environment
    problems: list[str] = field(default_factory=list)

    def hidden(self, path: str) -> tuple[bool, bool]:
        """(reported already as the unset variable it is, its value came from the environment)."""
        return path in self.missing, path in self.from_env


def load_config(path: str | Path, env: Mapping[str, str] | None = None) -> LoadedConfig:
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(source, [f"cannot read the file: {exc}"]) from None
    return parse_config(text, os.environ if env is None else env, source)


def parse_config(text: str, env: Mapping[str, str], source: str = "config.yaml") -> LoadedConfig:
    try:
        document = parse_yaml(text)
    except ValueError as exc:
        raise ConfigError(source, [str(exc)]) from None
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise ConfigError(source, ["the top level must be a mapping (server:, deployments:, …)"])
    state = _Interpolation(env)
    document = _interpolate(document, "", state)
    problems = state.problems + _literal_url_credentials(document, state)
    problems += [
        f"{path}: environment variable {var} is not set (write ${{{var}:-default}} to make it optional)"
        for path, var in state.missing.items()
        if not _is_optional_secret(path)
    ]
    config: GatewayConfig | None = None
    try:
        config = GatewayConfig.model_validate(document)
    except ValidationError as exc:
        problems += describe(exc, "", GatewayConfig, hidden=state.hidden)
    options = _validate_provider_blocks(document.get("deployments"), state, problems)
    _check_virtual_key_providers(document.get("virtual_keys"), problems)
    problems += dangling_references(document)  # also when another part is wrong: every problem in one run
    if problems or config is None:
        raise ConfigError(source, problems)
    loaded = _resolve(config, options, state.missing, source)
    loaded.warnings.extend(_encryption_warnings(config, env))
    return loaded


def _interpolate(node: Any, path: str, state: _Interpolation) -> Any:
    if isinstance(node, dict):
        return {key: _interpolate(value, _join(path, key), state) for key, value in node.items()}
    if isinstance(node, list):
        return [_interpolate(value, f"{path}[{index}]", state) for index, value in enumerate(node)]
    if not isinstance(node, str):
        return node
    is_secret = path.rsplit(".", 1)[-1] in SECRET_FIELDS
    reference = _PURE_REFERENCE.match(node)
    if is_secret and not reference:
        state.problems.append(
            f"{path}: a secret may only be given as an environment reference such as ${{MY_API_KEY}}, "
            "never written in the file"
        )
        return ""
    if ENV_REFERENCE.search(node):
        state.from_env.add(path)

    def substitute(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        value = state.env.get(name, "")
        if value:
            return value
        if default is None:
            state.missing[path] = name
        return default or ""

    value = ENV_REFERENCE.sub(substitute, node)
    if is_secret and not value and reference:  # an empty credential is a missing one
        state.missing[path] = reference.group(1)
    return value


def _literal_url_credentials(document: dict[str, Any], state: _Interpolation) -> list[str]:
    """`request_log.url` with a password written in the file: a secret, so only from the environment."""
    section = document.get("request_log")
    url = section.get("url") if isinstance(section, dict) else None
    if isinstance(url, str) and "request_log.url" not in state.from_env and url_password_literal(url):
        return [
            "request_log.url: a PostgreSQL URL with a password may only be given as an environment reference "
            "such as ${REQUEST_LOG_URL}, never written in the file"
        ]
    return []


def _validate_provider_blocks(deployments: Any, state: _Interpolation, problems: list[str]) -> dict[int, BaseModel]:
    """Check each `provider:` block with its type's own model, even if the rest of the file is wrong."""
    options: dict[int, BaseModel] = {}
    for index, item in enumerate(deployments if isinstance(deployments, list) else []):
        block = item.get("provider") if isinstance(item, dict) else None
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            continue  # the GatewayConfig errors already name it
        prefix = f"deployments[{index}].provider"
        provider_type = PROVIDER_TYPES.get(block["type"])
        if provider_type is None:
            problems.append(f"{prefix}.type: {unknown_provider_type(block['type'])}")
            continue
        try:
            options[index] = provider_type.options.model_validate({k: v for k, v in block.items() if k != "type"})
        except ValidationError as exc:
            problems.extend(describe(exc, prefix, provider_type.options, hidden=state.hidden, also=frozenset({"type"})))
    return options


def unknown_provider_type(name: str) -> str | None:
    """Why `name` is no provider type (with the nearest one when it looks like a typo); None: it is one.
    The types are read from the registry when asked, so a type added there is known at once."""
    if name in PROVIDER_TYPES:
        return None
    known = sorted(PROVIDER_TYPES)
    nearest = difflib.get_close_matches(name, known, n=1)
    hint = f"; did you mean {nearest[0]!r}?" if nearest else ""
    return f"unknown provider type {name!r}{hint} (known: {', '.join(known)})"


def _check_virtual_key_providers(virtual_keys: Any, problems: list[str]) -> None:
    """Each `virtual_keys[].provider` names a provider type, even if the rest of the file is wrong."""
    for index, entry in enumerate(virtual_keys if isinstance(virtual_keys, list) else []):
        provider = entry.get("provider") if isinstance(entry, dict) else None
        problem = unknown_provider_type(provider) if isinstance(provider, str) else None
        if problem:
            problems.append(f"virtual_keys[{index}].provider: {problem}")


def _resolve(
    config: GatewayConfig, options: dict[int, BaseModel], missing: dict[str, str], source: str
) -> LoadedConfig:
    warnings = policy_warnings(config)
    client_keys, disabled_keys = [], {}
    for index, key in enumerate(config.keys):
        variable = missing.get(f"keys[{index}].key")
        if variable:
            warnings.append(f"API key {key.name!r} is disabled: environment variable {variable} is not set")
            disabled_keys[key.name] = variable
        else:
            client_keys.append(key)
    admin_variable = missing.get("admin.key")
    if admin_variable:
        warnings.append(
            f"admin.key: environment variable {admin_variable} is not set: the admin API is off "
            "(set it and restart to turn it on); callers still need an API key"
        )
    admin_key = config.admin.key.get_secret_value() if config.admin.key is not None else ""
    weakness = admin_key_weakness(admin_key) if admin_key else None
    if weakness:
        warnings.append(
            f"admin.key is too weak to guard the admin API ({weakness}): the admin API is off; "
            f"use at least {ADMIN_KEY_MIN_LENGTH} random characters (e.g. `openssl rand -hex 32`) and restart"
        )
    warnings += _viewer_key_warnings(config, missing)
    metrics_variable = missing.get("observability.metrics.key")
    if metrics_variable:
        warnings.append(
            f"observability.metrics.key: environment variable {metrics_variable} is not set: "
            "/metrics and /dashboard/data are closed (they answer 401) until it is set and the gateway restarted"
        )
    warnings += _redis_warnings(missing)
    if metrics_local_only(config.observability.metrics, bool(config.keys) or config.admin.key is not None):
        warnings.append(
            "/metrics, /dashboard and /dashboard/data answer loopback clients only (403 to others): API keys are "
            "configured and observability.metrics.key is not; set it, or observability.metrics.port, to scrape "
            "from elsewhere"
        )
    if not config.keys and config.admin.key is None:
        warnings.append("no API keys are configured: every caller is accepted (add a 'keys:' section or 'admin.key')")
    elif not client_keys and config.redis.enabled:
        warnings.append("no API key of the config file has a value: only keys kept in Redis are accepted")
    elif not client_keys:
        warnings.append("no configured API key has a value: every request will be refused with 401")
    vk_secrets = {vk.name: vk.api_key for vk in config.virtual_keys}
    vk_missing = {vk.name: missing.get(f"virtual_keys[{i}].api_key") for i, vk in enumerate(config.virtual_keys)}
    deployments: dict[str, ResolvedDeployment] = {}
    for index, deployment in enumerate(config.deployments):
        credential: SecretStr | None = getattr(options[index], "api_key", None)
        variable = missing.get(f"deployments[{index}].provider.api_key")
        unavailable = f"its credential is missing (environment variable {variable} is not set)" if variable else None
        virtual_key = getattr(options[index], "virtual_key", None)
        if virtual_key is not None:
            credential = vk_secrets[virtual_key]
            if vk_missing[virtual_key]:
                variable = vk_missing[virtual_key]
                unavailable = (
                    f"its virtual key {virtual_key!r} has no value "
                    f"(environment variable {vk_missing[virtual_key]} is not set)"
                )
        if unavailable:
            warnings.append(f"deployment {deployment.name!r} is unavailable: {unavailable}")
        secret = credential.get_secret_value() if credential is not None else None
        price, price_source = _price_of(deployment, options[index], warnings)
        deployments[deployment.name] = ResolvedDeployment(
            deployment,
            options[index],
            secret or None,
            unavailable,
            variable if unavailable else None,
            price,
            price_source,
        )
    return LoadedConfig(config, deployments, client_keys, source, warnings, disabled_keys)


def _price_of(deployment: DeploymentConfig, options: BaseModel, warnings: list[str]) -> tuple[Price | None, str]:
    """(its price, the catalogue entry it came from); the catalogue is read only for `price: auto`."""
    if deployment.price is None or not deployment.price.auto:
        return deployment.price, ""
    from gateway.config.price_catalogue import catalogue_price  # the catalogue loads only when asked for

    found = catalogue_price(deployment, options, datetime.now(UTC))
    if found.warning:
        warnings.append(found.warning)
    return found.price, found.source


def _viewer_key_warnings(config: GatewayConfig, missing: dict[str, str]) -> list[str]:
    """A viewer key that is unset or too weak is off (it would guard every prompt the request log keeps)."""
    warnings = []
    for index, viewer in enumerate(config.admin.viewer_keys):
        variable = missing.get(f"admin.viewer_keys[{index}].key")
        weakness = admin_key_weakness(viewer.key.get_secret_value()) if not variable else None
        if variable:
            warnings.append(
                f"admin.viewer_keys[{index}] ({viewer.name!r}): environment variable {variable} is not set: "
                "this viewer key is off"
            )
        elif weakness:
            warnings.append(
                f"admin.viewer_keys[{index}] ({viewer.name!r}) is too weak ({weakness}): this viewer key is off; "
                f"use at least {ADMIN_KEY_MIN_LENGTH} random characters (e.g. `openssl rand -hex 32`) and restart"
            )
    if config.admin.viewer_keys and config.admin.key is None:
        warnings.append("admin.viewer_keys are set but admin.key is not: the admin API and the console are off")
    return warnings


def _encryption_warnings(config: GatewayConfig, env: Mapping[str, str]) -> list[str]:
    """Virtual keys can live in Redis (the admin API makes them, keys name them) but cannot be
    encrypted or read there without the key: said at start-up, not at the first 503."""
    if not config.redis.enabled or env.get(ENCRYPTION_KEY_VARIABLE, "").strip():
        return []
    in_config = {vk.name for vk in config.virtual_keys}
    named = sorted({n for key in config.keys for n in key.virtual_keys if n not in in_config and n != "*"})
    if config.admin.key is None and not named:
        return []
    named_text = f" (keys name {', '.join(repr(n) for n in named)}, which the config file does not define)"
    return [
        f"{ENCRYPTION_KEY_VARIABLE} is not set, so virtual keys kept in Redis can be neither stored "
        "(POST /admin/virtual-keys and `gateway keys add-virtual` answer encryption_key_missing) nor used "
        f"(503){named_text if named else ''}: make one with `gateway keys encryption-key`, set it on every "
        "replica and restart"
    ]


def _redis_warnings(missing: dict[str, str]) -> list[str]:
    variable = missing.get("redis.sentinel_password")
    if not variable:
        return []
    return [
        f"redis.sentinel_password: environment variable {variable} is not set: the Sentinels are asked without a "
        "password, which Sentinels with requirepass refuse (Redis is then unreachable and limits.on_redis_error "
        "decides) until it is set and the gateway restarted"
    ]


def _is_optional_secret(path: str) -> bool:
    return any(pattern.match(path) for pattern in _OPTIONAL_SECRETS)


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)
