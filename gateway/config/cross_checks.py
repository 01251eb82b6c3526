"""Checks that span sections of a parsed config: the members of a group cache alike (the names one
section gives another are checked in `references`)."""

from __future__ import annotations

from gateway.config.policies import cache_policy
from gateway.config.settings import GatewayConfig


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
