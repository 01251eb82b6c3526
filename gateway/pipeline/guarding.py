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
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from gateway.api.schemas import CompletionRequest
from gateway.config.policies import PolicyConfig
from policies.guardrails import (
    BODY_FIELD,
    HEADER,
    GuardrailViolation,
    InputGuard,
    OutputGuard,
    RequestFacts,
    StreamGuard,
    Verdict,
    close_webhook_sessions,
    combine_bounds,
    header_value,
    results_body,
)
from policies.guardrails.guards import INTENT_CHECKS, Guards
from providers.base import CompletionResult, CompletionStream, Provider, TokenizingProvider

KNOWN_FIELDS = frozenset(CompletionRequest.model_fields)
# Known fields besides `prompt` whose text goes upstream: FIM models read `suffix`; `stop` and `user`
# are not prompt, but the provider receives (and keeps) them all the same.
READ_FIELDS = frozenset({"suffix", "stop", "user"})

__all__ = [
    "KNOWN_FIELDS",
    "READ_FIELDS",
    "GuardedCall",
    "GuardedStream",
    "Guards",
    "check_input",
    "check_result",
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

    def header(self) -> dict[str, str]:
        return {HEADER: header_value(self.verdicts)} if self.verdicts else {}


async def check_input(
    guards: Guards,
    payload: dict[str, Any],
    context: str | None,
    provider: Provider | None = None,
) -> GuardedCall:
    """400 on a deny (nothing is sent upstream); a redacted prompt replaces the one in `payload`.
    `provider`: the deployment's backend, whose
    tokenizer (when it has one) decodes a prompt given as token ids."""
    max_tokens = payload.get("max_tokens")
    facts = RequestFacts(max_tokens=max_tokens if isinstance(max_tokens, int) else None, context=context)
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


async def check_result(guarded: GuardedCall, result: CompletionResult) -> CompletionResult:
    """The answer with denied choices withheld (`finish_reason: content_filter`) or redacted, and
    its verdicts; a deny whose policy names a status raises it instead."""
    body = result.body
    choices = [c for c in body.get("choices") or [] if isinstance(c, dict)]
    if guarded.output:
        outcome = await guarded.output.check([str(c.get("text") or "") for c in choices], guarded.facts)
        guarded.verdicts.extend(outcome.verdicts)
        if outcome.deny_status is not None and outcome.first_denied is not None:
            raise GuardrailViolation(outcome.first_denied, status=outcome.deny_status)
        for choice, checked in zip(choices, outcome.choices, strict=True):
            if checked.denied is not None:
                choice.update(text="", finish_reason="content_filter", logprobs=None)
            elif checked.text != choice.get("text"):
                choice.update(text=checked.text, logprobs=None)  # offsets no longer match the text
    body[BODY_FIELD] = results_body(guarded.verdicts)
    return CompletionResult(orjson.dumps(body), body)


class GuardedStream:
    """The upstream stream with each choice's text checked as it flows: held back only where a
    pattern could still complete, redacted in place, cut with `content_filter` on a deny."""

    def __init__(self, stream: CompletionStream, guarded: GuardedCall) -> None:
        self._stream = stream
        self._guarded = guarded
        self._guard: StreamGuard = guarded.output.stream(guarded.facts)
        self._stopped: set[int] = set()
        self._last: dict[str, Any] = {}

    async def __aiter__(self) -> AsyncIterator[list[bytes]]:
        async for payloads in self._stream:
            out = [await self._check(payload) for payload in payloads]
            yield [payload for payload in out if payload is not None]
        self._guarded.verdicts.extend(self._guard.verdicts())
        final = {key: self._last[key] for key in ("id", "object", "created", "model") if key in self._last}
        yield [orjson.dumps({**final, "choices": [], BODY_FIELD: results_body(self._guarded.verdicts)})]

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def _check(self, payload: bytes) -> bytes | None:
        try:
            chunk = orjson.loads(payload)
        except orjson.JSONDecodeError:
            return payload  # the relay reports malformed events as it always does
        choices = chunk.get("choices") if isinstance(chunk, dict) else None
        if not choices:
            return payload  # e.g. the usage chunk
        self._last = chunk
        kept = [choice for choice in choices if await self._check_choice(choice)]
        if not kept:
            return None
        chunk["choices"] = kept
        return orjson.dumps(chunk)

    async def _check_choice(self, choice: dict[str, Any]) -> bool:
        """Rewrites `choice` in place; False when nothing of it may be sent."""
        index = choice.get("index", 0)
        if index in self._stopped:
            return False
        original = str(choice.get("text") or "")
        step = self._guard.feed(index, original)
        text, finish_reason = step.text, step.finish_reason
        if finish_reason is None and choice.get("finish_reason") is not None:
            end = await self._guard.finish(index)
            text, finish_reason = text + end.text, end.finish_reason or choice["finish_reason"]
        if finish_reason is not None:
            self._stopped.add(index)
            choice["finish_reason"] = finish_reason
        if text != original:
            choice.update(text=text, logprobs=None)
        return bool(text) or finish_reason is not None
