"""`gateway init`: a starter config.yaml for one upstream, written as an operator would write it
(commented, secrets as environment references), that `gateway check-config` accepts as it is."""

from __future__ import annotations

import re
from dataclasses import dataclass

import yaml

# provider -> (the `type` it uses, its default base URL, default model, the variable of its key)
PROVIDERS: dict[str, tuple[str, str, str, str]] = {
    "mock": ("mock", "", "", ""),
    "openai": ("openai-chat", "https://api.openai.com/v1", "gpt-4o-mini", "OPENAI_API_KEY"),
    "anthropic": ("anthropic", "https://api.anthropic.com", "claude-sonnet-4-6", "ANTHROPIC_API_KEY"),
    "vllm": ("openai", "http://127.0.0.1:8000/v1", "Qwen/Qwen2.5-0.5B-Instruct", ""),
}
VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True, slots=True)
class Starter:
    provider: str = "mock"
    name: str = ""  # the deployment's name; default: the provider's
    base_url: str = ""  # default: the provider's
    model: str = ""  # the upstream's model; default: the provider's
    api_key_env: str = ""  # the variable holding the upstream's key; default: the provider's
    port: int = 8080
    keys: bool = True  # a client key (GATEWAY_KEY) and an admin key (GATEWAY_ADMIN_KEY)

    def problems(self) -> list[str]:
        found = []
        if self.provider not in PROVIDERS:
            found.append(f"--provider: one of {', '.join(PROVIDERS)}, not {self.provider!r}")
        if self.api_key_env and not VARIABLE.match(self.api_key_env):
            found.append(f"--api-key-env: an environment variable's name, not {self.api_key_env!r}")
        if self.base_url and not re.match(r"^https?://[^\s/]+", self.base_url):
            found.append(f"--base-url: an http(s) URL, not {self.base_url!r}")
        return found


def render(starter: Starter) -> str:
    kind, default_url, default_model, default_variable = PROVIDERS[starter.provider]
    name = starter.name or starter.provider
    provider: dict[str, object] = {"type": kind}
    if kind != "mock":
        provider["base_url"] = starter.base_url or default_url
        provider["model"] = starter.model or default_model
        variable = starter.api_key_env or default_variable
        if variable:
            provider["api_key"] = f"${{{variable}}}"
    deployment = {"name": name, "provider": provider}
    if kind == "mock":
        deployment["tags"] = ["demo"]
    document: dict[str, object] = {"server": {"host": "127.0.0.1", "port": starter.port}}
    if starter.keys:
        document["admin"] = {"key": "${GATEWAY_ADMIN_KEY}"}
        document["keys"] = [{"name": "first-app", "key": "${GATEWAY_KEY}", "deployments": ["*"]}]
    document["deployments"] = [deployment]
    header = [
        "# Written by `gateway init`. Check it with `gateway check-config`, run it with `gateway serve -c FILE`.",
        "# Every key: docs/reference/configuration.md. ${VAR} values are read from the environment;",
        "# secrets may only be given so.",
    ]
    if starter.keys:
        header += [
            "# Before serving: export GATEWAY_KEY (what clients send as their API key) and GATEWAY_ADMIN_KEY",
            "# (the admin API and console; at least 32 random characters), e.g. `openssl rand -hex 32` each.",
        ]
    if kind != "mock" and "api_key" in provider:
        header.append(f"# The upstream's credential: export {str(provider['api_key'])[2:-1]}.")
    body = yaml.safe_dump(document, sort_keys=False, default_flow_style=False)
    return "\n".join(header) + "\n\n" + body
