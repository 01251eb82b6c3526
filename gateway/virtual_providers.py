"""Providers that call a deployment's upstream with a virtual key's credential instead of its own.

One provider (with its own connection pool) per deployment and credential, made on first use and
kept for the life of the app, so a client naming a virtual key pays no set-up per request. Their
number is bounded by the deployments times the virtual keys an operator defines.
"""

from __future__ import annotations

import hashlib

from gateway.config_loader import ResolvedDeployment
from providers.base import Provider
from providers.registry import PROVIDER_TYPES

_Key = tuple[str, str, str, str]  # deployment, type, options, credential digest


class VirtualProviders:
    def __init__(self) -> None:
        self._providers: dict[_Key, Provider] = {}

    def get(self, resolved: ResolvedDeployment, credential: str) -> Provider:
        config = resolved.config
        digest = hashlib.sha256(credential.encode()).hexdigest()
        key = (config.name, config.provider.type, resolved.options.model_dump_json(), digest)
        provider = self._providers.get(key)
        if provider is None:
            provider = PROVIDER_TYPES[config.provider.type].create(config.name, resolved.options, credential)
            self._providers[key] = provider
        return provider

    async def aclose(self) -> None:
        providers, self._providers = list(self._providers.values()), {}
        for provider in providers:
            await provider.aclose()
