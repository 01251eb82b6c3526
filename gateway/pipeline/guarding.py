"""The guardrails step of a request: input checks before anything leaves, output checks on the
answer, incremental on streams so that denied text never reaches the client.

A deployment's guards join the `input:` and `output:` lists of all its policies; a request is
guarded by the guards of its route's first candidate (as it is cached by its policy). Verdicts go
in `guardrail_results` (the body, or one last chunk before `[DONE]`) and `x-gateway-guardrails`
(on a stream only the input verdicts, since the header leaves before the output is known).

Input checks read every text field the upstream receives: `prompt`, `suffix`, `stop`, `user` (the
provider keeps it: a PII policy must see it), and every field the Completions reference does not
know (forwarded as-is to OpenAI-compatible upstreams), each string in it, nested ones included. A
deny names the field (the error's `param`); a redaction rewrites it in place.

Output checks: `answer_guarding`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gateway.api.schemas import CompletionRequest
from gateway.config.policies import PolicyConfig
from policies.guardrails import (
    HEADER,
    InputGuard,
    OutputGuard,
    RequestFacts,
    Verdict,
    close_webhook_sessions,
    combine_bounds,
    header_value,
)
from policies.guardrails.guards import INTENT_CHECKS, Guards
from providers.base import Provider, TokenizingProvider

KNOWN_FIELDS = frozenset(CompletionRequest.model_fields)
# Known fields besides `prompt` whose text goes upstream: FIM models read `suffix`; `stop` and `user`
# are not prompt, but the provider receives (and keeps) them all the same.
READ_FIELDS = frozenset({"suffix", "stop", "user"})

__all__ = [
    "KNOWN_FIELDS",
    "READ_FIELDS",
    "GuardedCall",
    "Guards",
    "check_input",
    "close_webhook_sessions",
    "guards_for",
    "text_fields",
]


def guards_for(names: Iterable[str], policies: Mapping[str, PolicyConfig]) -> Guards | None:
    """The deployment's guards from its policies, in order; None when none has a check."""
    chosen = [(name, policies[name]) for name in names if name in policies]
    inputs = [check for _, policy in chosen for check in policy.input]
    outputs = [check for _, policy in chosen for check in policy.output]
    if not inputs and not outputs:
        return None
    named = ",".join(name for name, policy in chosen if policy.input or policy.output)
    bounds = combine_bounds(policy.guardrails for _, policy in chosen)
    # A chat's leading instructions: without the intent checks of the policies that trust them.
    trusted = [
        check
        for _, policy in chosen
        for check in policy.input
        if not (policy.trust_leading_instructions and check.check in INTENT_CHECKS)
    ]
    instructions = InputGuard(trusted, bounds) if len(trusted) < len(inputs) else None
    return Guards(InputGuard(inputs, bounds), OutputGuard(outputs, bounds), named, instructions)


@dataclass(slots=True)
class GuardedCall:
    """What the output checks of one request need, and the verdicts so far."""

    output: OutputGuard
    facts: RequestFacts
    policy: str
    verdicts: list[Verdict] = field(default_factory=list)
    # The input texts a check redacted, each as it came -> as it was sent (chat): what a body sent
    # in its own API's shape (native pass-through) must say instead.
    rewrites: dict[str, str] = field(default_factory=dict)

    def header(self) -> dict[str, str]:
        return {HEADER: header_value(self.verdicts)} if self.verdicts else {}


async def check_input(
    guards: Guards,
    payload: dict[str, Any],
    context: str | None,
    provider: Provider | None = None,
    scope: str = "",
) -> GuardedCall:
    """400 on a deny (nothing is sent upstream); a redacted prompt replaces the one in `payload`.
    `provider`: the deployment's backend, whose
    tokenizer (when it has one) decodes a prompt given as token ids. `scope`: the caller's, under
    which the pattern checks' results on a text are remembered (a text sent again is not re-judged)."""
    max_tokens = payload.get("max_tokens")
    limit = max_tokens if isinstance(max_tokens, int) else None
    facts = RequestFacts(max_tokens=limit, context=context, scope=scope)
    decoder = await provider.prompt_decoder() if isinstance(provider, TokenizingProvider) else None
    outcome = await guards.input.check(payload.get("prompt"), facts, decoder)
    if outcome.denied is not None:
        error = outcome.error()
        error.policy = guards.policy
        raise error
    verdicts = list(outcome.verdicts)
    clamps = [outcome.max_tokens] if outcome.max_tokens is not None else []
    fields = text_fields(payload)
    if fields:
        checked = await guards.input.check_fields(fields, facts)
        verdicts.extend(checked.verdicts)
        if checked.denied is not None:
            error = checked.error()
            error.policy = guards.policy
            raise error
        payload.update(checked.values)
        if checked.max_tokens is not None:
            clamps.append(checked.max_tokens)
    if outcome.changed:
        payload["prompt"] = outcome.prompt
    if clamps:
        payload["max_tokens"] = min(clamps)
    n = payload.get("n")
    output_facts = RequestFacts(
        max_tokens=payload.get("max_tokens"),
        prompts=outcome.texts,
        n=n if isinstance(n, int) else 1,
        context=context,
    )
    return GuardedCall(guards.output, output_facts, guards.policy, verdicts)


def text_fields(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The fields besides `prompt` whose text goes upstream: `suffix`, `stop`, `user`, and every field
    the Completions reference does not know (forwarded untouched to OpenAI-compatible upstreams)."""
    return {
        name: value
        for name, value in payload.items()
        if (name in READ_FIELDS or name not in KNOWN_FIELDS) and value is not None
    }
