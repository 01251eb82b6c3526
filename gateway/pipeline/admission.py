"""Who the caller is and what they may spend: keys, virtual keys, rate limits and budgets.

The pipeline asks here three times per request: `keys.authenticate` (401), `credential` (the virtual
key a client names, checked against its key and the deployment's provider), and `admit` before
the upstream call (429 from the key's and the deployment's limits or the key's budget), with
`settle` after it, always, charging the real usage.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import SecretStr

from gateway.keys.directory import KeyDirectory
from gateway.keys.records import KeyRecord
from gateway.keys.virtual import VirtualKeys, presented_virtual_key
from gateway.pipeline.usage import Usage
from gateway.routing.deployments import Deployment
from policies.limits.estimate import Estimate
from policies.limits.service import Admission, Caller, Limits
from policies.limits.specs import FREE, NO_LIMITS, LimitSpec, Price


@dataclass(frozen=True, slots=True)
class Credential:
    """A virtual key's provider credential, for the deployments of its provider type."""

    provider_type: str
    value: SecretStr
    name: str = ""  # the virtual key's name (part of the cache partition of the answers it produces)


@dataclass(frozen=True, slots=True)
class DeploymentLimits:
    limits: LimitSpec
    price: Price


class Gatekeeper:
    def __init__(
        self, keys: KeyDirectory, virtual: VirtualKeys, limits: Limits, deployments: Mapping[str, DeploymentLimits]
    ) -> None:
        self.keys = keys
        self.virtual = virtual
        self.limits = limits
        self._deployments = deployments

    async def credential(self, caller: KeyRecord, headers: Mapping[str, str], first: Deployment) -> Credential | None:
        """The named virtual key's credential. It must suit the provider of the deployment the
        route resolves to; members of another provider type (a fallback) keep their own."""
        name = presented_virtual_key(headers)
        if name is None:
            return None
        value = await self.virtual.resolve(caller, name, first.provider_type)
        return Credential(first.provider_type, value, name)

    async def admit(self, caller: KeyRecord, deployment: Deployment, estimate: Estimate) -> Admission:
        """Rate limits of the key and of the deployment the route resolves to, and the key's budget."""
        limits = self._deployments.get(deployment.name)
        who = Caller(
            key=None if caller.source == "open" else caller.name,
            deployment=deployment.name,
            key_limits=caller.limits,
            budget=caller.budget,
            deployment_limits=limits.limits if limits else NO_LIMITS,
            price=limits.price if limits else FREE,
        )
        return await self.limits.admit(who, estimate)

    async def settle(self, admission: Admission, usage: Usage) -> None:
        await self.limits.settle(
            admission,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            cached_tokens=usage.cached_tokens,
            cache_write_tokens=usage.cache_write_tokens,
        )
