"""The `policies:` section: named bundles of behaviour that deployments apply by listing their names.

A policy has a `cache` block and guardrail checks, `input` and `output` (see `gateway.pipeline.guarding`). A
deployment's effective cache policy is the `cache` block of the first of its policies that has
one. A request is cached by the policy of the first candidate of its route (the first member of
a group or tag set), so the members of a group should share their policies: `policy_warnings`
says when they do not.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from policies.cache.policy import CachePolicy
from policies.guardrails import InputChecks, OutputChecks

if TYPE_CHECKING:
    from gateway.config.settings import GatewayConfig


class PolicyConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    cache: CachePolicy | None = None  # present: this policy's deployments cache their answers
    input: InputChecks = []  # prompt checks, before anything goes upstream
    output: OutputChecks = []  # completion checks, incremental on streams


def cache_policy(names: Iterable[str], policies: Mapping[str, PolicyConfig]) -> CachePolicy | None:
    """The cache block of the first named policy that has one (unknown names are config errors earlier)."""
    for name in names:
        policy = policies.get(name)
        if policy is not None and policy.cache is not None:
            return policy.cache
    return None


def policy_problems(config: GatewayConfig) -> list[str]:
    """Policy names a deployment lists but `policies:` does not define, by YAML path."""
    defined = ", ".join(sorted(config.policies)) or "none"
    return [
        f"deployments[{index}].policies[{position}]: deployment {deployment.name!r} names policy {name!r}, "
        f"which is not defined under policies (defined: {defined})"
        for index, deployment in enumerate(config.deployments)
        for position, name in enumerate(deployment.policies)
        if name not in config.policies
    ]


def policy_warnings(config: GatewayConfig) -> list[str]:
    """Groups whose members cache differently: only the first member's cache policy is applied."""
    members: dict[str, list[str]] = {}
    for deployment in config.deployments:
        for alias in deployment.aliases:
            members.setdefault(alias, []).append(deployment.name)
    by_name = {d.name: cache_policy(d.policies, config.policies) for d in config.deployments}
    return [
        f"the deployments of group {alias!r} ({', '.join(names)}) have different cache policies; requests "
        f"for the group are cached by the policy of {names[0]!r}: give its members the same policies"
        for alias, names in members.items()
        if len({repr(by_name[name]) for name in names}) > 1
    ]
