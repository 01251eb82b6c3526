"""The `policies:` section: named bundles of behaviour that deployments apply by listing their names.

A policy has a `cache` block and guardrail checks, `input` and `output` (see `gateway.pipeline.guarding`). A
deployment's effective cache policy is the `cache` block of the first of its policies that has
one. A request is cached by the policy of the first candidate of its route (the first member of
a group or tag set), so the members of a group should share their policies
(`gateway.config.cross_checks.policy_warnings` says when they do not).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pydantic import BaseModel, ConfigDict

from policies.cache.policy import CachePolicy
from policies.guardrails import GuardrailBounds, InputChecks, OutputChecks


class PolicyConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    cache: CachePolicy | None = None  # present: this policy's deployments cache their answers
    input: InputChecks = []  # prompt checks, before anything goes upstream
    output: OutputChecks = []  # completion checks, incremental on streams
    # The leading system/developer messages of a chat (the application's own instructions, which
    # often read like the attacks they guard against) skip this policy's intent checks (injection,
    # classifier). False: every message is judged by every check (callers write their own system
    # prompts). An instruction message after a user, assistant or tool message is always judged.
    trust_leading_instructions: bool = True
    guardrails: GuardrailBounds | None = None  # what one request's guardrail work may cost (see bounds)


def cache_policy(names: Iterable[str], policies: Mapping[str, PolicyConfig]) -> CachePolicy | None:
    """The cache block of the first named policy that has one (unknown names are config errors earlier)."""
    for name in names:
        policy = policies.get(name)
        if policy is not None and policy.cache is not None:
            return policy.cache
    return None
