"""The guardrails step of an embeddings request: its input texts, before anything leaves.

Every input is checked like a completion's prompt (each of a list on its own, all in one batch;
token ids decoded with the deployment's tokenizer when it has one, else `skipped`), and so are
`user` and every field the Embeddings reference does not know (the upstream receives them). A deny
is a 400 naming the input (`input[3]`) or the field. A redaction rewrites the input in place, so
what is embedded is the redacted text (`[EMAIL]` where the address was), not the original: the
vector then stands for the redacted text. An embedding has no text to check on output.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from gateway.api.embeddings import EmbeddingsRequest
from gateway.pipeline.guarding import GuardedCall
from policies.guardrails import GuardrailViolation, RequestFacts, Verdict
from policies.guardrails.guards import Guards
from providers.base import Provider, TokenizingProvider

KNOWN_FIELDS = frozenset(EmbeddingsRequest.model_fields)
READ_FIELDS = frozenset({"user"})  # not embedded, but the provider receives (and keeps) it


async def check_embeddings_input(
    guards: Guards, payload: dict[str, Any], provider: Provider | None, scope: str = ""
) -> GuardedCall:
    """400 on a deny (nothing is sent upstream); redacted inputs replace those in `payload`. `scope`:
    the caller's, under which the pattern checks' results on a text are remembered."""
    facts = RequestFacts(max_tokens=None, scope=scope)
    decoder = await provider.prompt_decoder() if isinstance(provider, TokenizingProvider) else None
    outcome = await guards.input.check(payload.get("input"), facts, decoder)
    if outcome.denied is not None:
        raise _violation(_at_input(outcome.denied), guards.policy)
    verdicts = [_at_input(verdict) for verdict in outcome.verdicts]
    fields = {
        name: value
        for name, value in payload.items()
        if (name in READ_FIELDS or name not in KNOWN_FIELDS) and value is not None
    }
    if fields:
        checked = await guards.input.check_fields(fields, facts)
        verdicts.extend(checked.verdicts)
        if checked.denied is not None:
            raise _violation(checked.denied, guards.policy)
        payload.update(checked.values)
    if outcome.changed:
        payload["input"] = outcome.prompt
    return GuardedCall(guards.output, facts, guards.policy, verdicts)


def _at_input(verdict: Verdict) -> Verdict:
    """The verdict named by the body's field (`input`, `input[3]`), not a completion's `prompt`."""
    if verdict.field is not None:
        return verdict
    where = "input" if verdict.index is None else f"input[{verdict.index}]"
    return dataclasses.replace(verdict, field=where)


def _violation(verdict: Verdict, policy: str) -> GuardrailViolation:
    error = GuardrailViolation(verdict)
    error.policy = policy
    return error
