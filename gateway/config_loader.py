"""Read config.yaml: YAML, `${VAR}` / `${VAR:-default}` interpolation, validation, secret checks.

Every problem is reported at once, one line each, named by its YAML path. A credential whose
environment variable is unset does not fail the load: its deployments are marked unavailable
(they answer 503) and the others keep serving.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from gateway.config import ENV_REFERENCE, SECRET_FIELDS, ClientKeyConfig, DeploymentConfig, GatewayConfig
from providers.registry import PROVIDER_TYPES

_PURE_REFERENCE = re.compile(r"^\$\{[A-Za-z_][A-Za-z0-9_]*(?::-)?\}$")
_DEPLOYMENT_SECRET = re.compile(r"^deployments\[(\d+)\]\.provider\.api_key$")
_VIRTUAL_KEY_SECRET = re.compile(r"^virtual_keys\[(\d+)\]\.api_key$")
_CLIENT_KEY_SECRET = re.compile(r"^keys\[(\d+)\]\.key$")


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
    credential: str | None
    unavailable: str | None = None  # why it cannot serve (a missing secret), logged at start-up


@dataclass(frozen=True, slots=True)
class LoadedConfig:
    config: GatewayConfig
    deployments: dict[str, ResolvedDeployment]
    client_keys: list[ClientKeyConfig]  # those whose secret is present
    source: str = "config.yaml"
    warnings: list[str] = field(default_factory=list)


def load_config(path: str | Path, env: Mapping[str, str] | None = None) -> LoadedConfig:
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(source, [f"cannot read the file: {exc}"]) from None
    return parse_config(text, os.environ if env is None else env, source)


def parse_config(text: str, env: Mapping[str, str], source: str = "config.yaml") -> LoadedConfig:
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(source, [f"not valid YAML{where}: {getattr(exc, 'problem', None) or exc}"]) from None
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise ConfigError(source, ["the top level must be a mapping (server:, deployments:, …)"])
    problems: list[str] = []
    missing: dict[str, str] = {}
    document = _interpolate(document, "", env, missing, problems)
    try:
        config = GatewayConfig.model_validate(document)
    except ValidationError as exc:
        raise ConfigError(source, problems + _describe(exc, prefix="")) from None
    loaded = _resolve(config, missing, problems, source)
    if problems:
        raise ConfigError(source, problems)
    return loaded


def _interpolate(node: Any, path: str, env: Mapping[str, str], missing: dict[str, str], problems: list[str]) -> Any:
    if isinstance(node, dict):
        return {key: _interpolate(value, _join(path, key), env, missing, problems) for key, value in node.items()}
    if isinstance(node, list):
        return [_interpolate(value, f"{path}[{index}]", env, missing, problems) for index, value in enumerate(node)]
    if not isinstance(node, str):
        return node
    is_secret = path.rsplit(".", 1)[-1] in SECRET_FIELDS
    if is_secret and not _PURE_REFERENCE.match(node):
        problems.append(
            f"{path}: a secret may only be given as an environment reference such as ${{MY_API_KEY}}, "
            "never written in the file"
        )
        return ""

    def substitute(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        value = env.get(name, "")
        if value:
            return value
        if default is not None:
            return default
        missing[path] = name
        return ""

    value = ENV_REFERENCE.sub(substitute, node)
    if is_secret and not value:  # an empty credential is a missing one, whatever the default said
        missing[path] = node[2:-1].split(":-")[0].rstrip("}")
    return value


def _resolve(config: GatewayConfig, missing: dict[str, str], problems: list[str], source: str) -> LoadedConfig:
    warnings: list[str] = []
    vk_missing = {
        config.virtual_keys[int(m.group(1))].name: var
        for path, var in missing.items()
        if (m := _VIRTUAL_KEY_SECRET.match(path))
    }
    key_missing = {int(m.group(1)): var for path, var in missing.items() if (m := _CLIENT_KEY_SECRET.match(path))}
    dep_missing = {int(m.group(1)): var for path, var in missing.items() if (m := _DEPLOYMENT_SECRET.match(path))}
    for path, var in missing.items():
        if not (_VIRTUAL_KEY_SECRET.match(path) or _CLIENT_KEY_SECRET.match(path) or _DEPLOYMENT_SECRET.match(path)):
            problems.append(
                f"{path}: environment variable {var} is not set (write ${{{var}:-default}} to make it optional)"
            )
    client_keys = []
    for index, key in enumerate(config.keys):
        if index in key_missing:
            warnings.append(f"API key {key.name!r} is disabled: environment variable {key_missing[index]} is not set")
        else:
            client_keys.append(key)
    if not config.keys:
        warnings.append("no API keys are configured: every caller is accepted (add a 'keys:' section)")
    secrets = {vk.name: vk.api_key.get_secret_value() for vk in config.virtual_keys}
    deployments: dict[str, ResolvedDeployment] = {}
    for index, deployment in enumerate(config.deployments):
        resolved = _resolve_deployment(index, deployment, secrets, vk_missing, dep_missing, problems)
        if resolved is None:
            continue
        if resolved.unavailable:
            warnings.append(f"deployment {deployment.name!r} is unavailable: {resolved.unavailable}")
        deployments[deployment.name] = resolved
    return LoadedConfig(
        config=config, deployments=deployments, client_keys=client_keys, source=source, warnings=warnings
    )


def _resolve_deployment(
    index: int,
    deployment: DeploymentConfig,
    vk_secrets: dict[str, str],
    vk_missing: dict[str, str],
    dep_missing: dict[int, str],
    problems: list[str],
) -> ResolvedDeployment | None:
    prefix = f"deployments[{index}].provider"
    provider_type = PROVIDER_TYPES.get(deployment.provider.type)
    if provider_type is None:
        known = ", ".join(sorted(PROVIDER_TYPES))
        problems.append(f"{prefix}.type: unknown provider type {deployment.provider.type!r} (known: {known})")
        return None
    try:
        options = provider_type.options.model_validate(deployment.provider.options)
    except ValidationError as exc:
        problems.extend(_describe(exc, prefix=prefix))
        return None
    api_key = getattr(options, "api_key", None)
    credential = api_key.get_secret_value() if api_key is not None else None
    unavailable = None
    if index in dep_missing:
        unavailable = f"its credential is missing (environment variable {dep_missing[index]} is not set)"
    virtual_key = getattr(options, "virtual_key", None)
    if virtual_key is not None:
        credential = vk_secrets[virtual_key]
        if virtual_key in vk_missing:
            variable = vk_missing[virtual_key]
            unavailable = f"its virtual key {virtual_key!r} has no value (environment variable {variable} is not set)"
    return ResolvedDeployment(deployment, options, credential or None, unavailable)


def _describe(exc: ValidationError, prefix: str) -> list[str]:
    problems = []
    for error in exc.errors():
        path = prefix
        for part in error["loc"]:
            path = f"{path}[{part}]" if isinstance(part, int) else _join(path, str(part))
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = "unknown setting (check the spelling; see the configuration reference in README.md)"
        value = error.get("input")
        last = str(error["loc"][-1]) if error["loc"] else ""
        if isinstance(value, (str, int, float)) and last not in SECRET_FIELDS and error["type"] != "extra_forbidden":
            message += f" (got {value!r})"
        problems.append(f"{path or '(top level)'}: {message}")
    return problems


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)
