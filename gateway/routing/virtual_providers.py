"""Provider instances: how one is made from a resolved deployment and a credential, the fingerprint
that says when an existing one can be kept, and the providers that call a deployment's upstream
with a virtual key's credential instead of its own.

Those are made on first use, one (with its own connection pool) per deployment and credential,
and kept for the life of the app, so a client naming a virtual key pays no set-up per request.
Their number is bounded by the deployments times the virtual keys an operator defines.
"""

from __future__ import annotations

import hashlib

from gateway.config.loader import ResolvedDeployment
from providers.base import Provider
from providers.registry import PROVIDER_TYPES
from providers.upstream.scrubbing import LearntSecrets

Fingerprint = tuple[str, str, str, str]  # name, type, options, credential digest


def create_provider(resolved: ResolvedDeployment, credential: str | None) -> Provider:
    config = resolved.config
    return PROVIDER_TYPES[config.provider.type].create(config.name, resolved.options, credential)


def fingerprint(resolved: ResolvedDeployment, credential: str | None) -> Fingerprint:
    """Equal for two providers of the same deployment, options and credential: one can stand for
    the other (a reload that left a deployment as it was keeps its pooled connections)."""
    digest = hashlib.sha256((credential or "").encode()).hexdigest()
    return (resolved.config.name, resolved.config.provider.type, resolved.options.model_dump_json(), digest)


class VirtualProviders:
    def __init__(self) -> None:
        self._providers: dict[Fingerprint, Provider] = {}
        # Their credentials (virtual keys from the Redis store among them), for the scrubber:
        # learnt once, when the provider is made, and scrubbed from every upstream failure since.
        self.learnt = LearntSecrets()

    def get(self, resolved: ResolvedDeployment, credential: str) -> Provider:
        key = fingerprint(resolved, credential)
        provider = self._providers.get(key)
        if provider is None:
            provider = self._providers[key] = create_provider(resolved, credential)
            self.learnt.add(credential)
        return provider

    async def aclose(self) -> None:
        providers, self._providers = list(self._providers.values()), {}
        for provider in providers:
            await provider.aclose()
