"""An input redaction, written into the body a deployment is sent as it came (native pass-through:
a Messages body to an Anthropic deployment, a Responses body to an OpenAI one).

The input guardrails judge the chat view of the request (`chat_guarding`: one decision, one set of
verdicts, whichever deployment answers). When they redacted a text, the native body must say what
the chat view says, with the rest of it (`cache_control`, thinking and its signatures, reasoning
items, built-in tools, fields chat has no place for) as it came. Each text of the body
(`gateway.api.messages.texts`, `gateway.api.responses.texts`) that is a text the chat view had gets
that text's redaction; the others are pieces of a text the translation joined or re-encoded
(system blocks, a tool result's blocks or its `Error: ` prefix, a `tool_use` input as JSON
arguments, an assistant's output parts), and are checked on their own, by the same guard, in one
batch: a deny there refuses the request as a deny on the chat view does, and a redaction of an
object key too (a key cannot be rewritten in place). This runs only for a request whose chat view a
check redacted, but for the texts the chat view does not carry at all (a Responses input item only
a native deployment is sent), which are checked so whatever the chat view's checks did. The length
cap's clamp of the chat view's limit is carried over as well (`max_tokens`, `max_output_tokens`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.api.body_texts import BodyText
from gateway.api.messages.texts import body_texts as messages_texts
from gateway.api.responses.texts import body_texts as responses_texts
from gateway.pipeline.chat_guarding import FIXED_REDACTED, at_path, violation
from gateway.pipeline.guarding import GuardedCall
from policies.guardrails import InputGuard, RequestFacts, Verdict
from policies.guardrails.guards import Guards
from providers.base import NativeRequest


async def redact_native(guards: Guards, guarded: GuardedCall, chat: Mapping[str, Any], native: NativeRequest) -> None:
    """Rewrite `native`'s body (each body it may send) in place as the input checks rewrote `chat`
    (its chat view); raises the 400 a deny gives."""
    if native.api == "messages":
        limit = chat.get("max_tokens")
        _clamp(native.body, "max_tokens", limit)
        if guarded.rewrites:
            await _redact(guards, guarded, messages_texts(native.body), limit)
        return
    limit = chat.get("max_completion_tokens")
    for body in (native.body, native.rebuilt):
        if body is None:
            continue
        _clamp(body, "max_output_tokens", limit)
        texts = responses_texts(body)
        if not guarded.rewrites:  # only what the chat view's checks never saw
            texts = [text for text in texts if not text.viewed]
        if texts:
            await _redact(guards, guarded, texts, limit)


def _clamp(body: dict[str, Any], field: str, limit: Any) -> None:
    if limit != body.get(field):  # the length cap clamped it
        body[field] = limit


async def _redact(guards: Guards, guarded: GuardedCall, texts: list[BodyText], limit: Any) -> None:
    rewrites = guarded.rewrites
    written = set(rewrites.values())
    pieces: list[BodyText] = []
    for text in texts:
        value = text.value
        redacted = rewrites.get(value) if text.viewed else None
        if redacted is None:
            if value and (not text.viewed or value not in written):
                pieces.append(text)
        elif text.fixed:
            raise violation(Verdict("guardrails", "input", "deny", FIXED_REDACTED, field=text.path), guards.policy)
        else:
            text.set(redacted)
    facts = RequestFacts(max_tokens=limit if isinstance(limit, int) else None, context=guarded.facts.context)
    instructions = [text for text in pieces if text.system]
    others = [text for text in pieces if not text.system]
    for guard, group in ((guards.for_instructions(), instructions), (guards.input, others)):
        if group:
            await _redact_pieces(guard, group, facts, guards.policy)


async def _redact_pieces(guard: InputGuard, group: list[BodyText], facts: RequestFacts, policy: str) -> None:
    first: dict[str, BodyText] = {}
    for text in group:
        first.setdefault(text.value, text)
    outcome = await guard.check(list(first), facts)
    if outcome.denied is not None:
        raise violation(at_path(outcome.denied, [text.path for text in first.values()]), policy)
    if not outcome.changed:
        return
    redacted = dict(zip(first, outcome.prompt, strict=True))
    for text in group:
        new = redacted[text.value]
        if new == text.value:
            continue
        if text.fixed:
            raise violation(Verdict("guardrails", "input", "deny", FIXED_REDACTED, field=text.path), policy)
        text.set(new)
