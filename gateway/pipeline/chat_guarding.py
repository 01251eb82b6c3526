"""The guardrails step for `/v1/chat/completions`: the same guards as completions (see `guarding`),
on the texts of the chat shape.

Input checks read every text of the request the upstream's model reads (`gateway.api.chat_texts`:
messages, tools and their schemas, tool_choice, response_format, unknown fields at every level, keys
included), each distinct text checked once, on its own (as each prompt of a list is); a deny names
its path (`tools[0].function.description`), a redaction rewrites it in place, and a redaction of a
key or of a name other fields refer to is refused (400 naming it). The leading system/developer
messages skip the intent checks when the policies trust them (`Guards.instructions`). A length cap
clamps `max_completion_tokens` (or `max_tokens` when that is what the client sent).

Output checks read every text of each choice (`choice_texts`: content, refusal, reasoning, tool-call
and function-call arguments and names, and every string of a field we do not know), as for
completions (`answer_guarding`): a deny withholds the choice
(`finish_reason: content_filter`, no texts at all), a redaction rewrites the text in place; on a
stream each text flows through the stream guard as it arrives.
"""

from __future__ import annotations

from typing import Any

from gateway.api.chat_texts import Text, chat_texts, leading_instructions
from gateway.pipeline.answer_guarding import GuardedStream, check_answer
from gateway.pipeline.guarding import GuardedCall
from policies.guardrails import GuardrailViolation, InputGuard, RequestFacts, Verdict
from policies.guardrails.guards import Guards
from providers.base import CompletionResult

FIXED_REDACTED = "a check would redact it, and a key or a name other fields refer to cannot be rewritten"
CHAT_KNOWN = frozenset({"index", "message", "delta", "logprobs", "finish_reason"})  # a choice's fields we know


async def check_chat_input(
    guards: Guards, payload: dict[str, Any], context: str | None, scope: str = ""
) -> GuardedCall:
    """400 on a deny (nothing is sent upstream); redacted texts replace the ones in `payload`. `scope`:
    the caller's, under which the pattern checks' results on a text are remembered: the system prompt
    and the earlier turns a chat sends again are not judged again."""
    limit_field = "max_tokens" if payload.get("max_completion_tokens") is None and "max_tokens" in payload else None
    limit_field = limit_field or "max_completion_tokens"
    limit = payload.get(limit_field)
    facts = RequestFacts(max_tokens=limit if isinstance(limit, int) else None, context=context, scope=scope)
    texts = [text for text in chat_texts(payload).texts if text.text]
    verdicts: list[Verdict] = []
    rewrites: dict[str, str] = {}
    clamps: list[int] = []
    # The application's own instructions (the leading system/developer messages) are checked
    # without the intent checks when its policies trust them (guards.instructions).
    leading = leading_instructions(payload.get("messages")) if guards.instructions is not None else 0
    instructions = [text for text in texts if 0 <= text.message < leading]
    others = [text for text in texts if not 0 <= text.message < leading] if instructions else texts
    for guard, group in ((guards.for_instructions(), instructions), (guards.input, others)):
        if group:
            clamp = await _check_texts(guard, group, facts, verdicts, rewrites, guards.policy)
            if clamp is not None:
                clamps.append(clamp)
    if clamps:
        payload[limit_field] = min([*clamps, *([limit] if isinstance(limit, int) else [])])
    messages = payload.get("messages") or []
    asked = [
        text.holder[text.key]
        for text in texts
        if text.content and text.message >= 0 and messages[text.message].get("role") == "user"
    ]
    n = payload.get("n")
    output_facts = RequestFacts(
        max_tokens=payload.get(limit_field),
        prompts=(asked[-1],) if asked else (),
        n=n if isinstance(n, int) else 1,
        context=context,
    )
    return GuardedCall(guards.output, output_facts, guards.policy, verdicts, rewrites)


async def _check_texts(
    guard: InputGuard,
    group: list[Text],
    facts: RequestFacts,
    verdicts: list[Verdict],
    rewrites: dict[str, str],
    policy: str,
) -> int | None:
    """Check each distinct text of `group` once; raise on a deny, or on a redaction of a fixed text
    (a key or an identifier, which cannot be rewritten); else rewrite the redacted texts in place
    (and note each in `rewrites`). The length cap's clamp, if one applied."""
    first: dict[str, Text] = {}
    for text in group:
        first.setdefault(text.text, text)
    paths = [text.path for text in first.values()]
    outcome = await guard.check(list(first), facts)
    verdicts += [at_path(verdict, paths) for verdict in outcome.verdicts]
    if outcome.denied is not None:
        raise violation(at_path(outcome.denied, paths), policy)
    if outcome.changed:
        redacted = dict(zip(first, outcome.prompt, strict=True))
        changed = [text for text in group if redacted[text.text] != text.text]
        fixed = next((text for text in changed if text.fixed), None)
        if fixed is not None:
            reason = FIXED_REDACTED
            raise violation(Verdict("guardrails", "input", "deny", reason, field=fixed.path), policy)
        for text in changed:
            text.holder[text.key] = rewrites[text.text] = redacted[text.text]
    return outcome.max_tokens


async def check_chat_result(guarded: GuardedCall, result: CompletionResult) -> CompletionResult:
    """The answer with denied choices withheld (`finish_reason: content_filter`) or redacted, and
    its verdicts; a deny whose policy names a status raises it instead."""
    return await check_answer(guarded, result, "message", CHAT_KNOWN, _withhold_message)


def _withhold_message(choice: dict[str, Any]) -> None:
    choice["message"] = {"role": "assistant", "content": None, "refusal": None}


class ChatGuardedStream(GuardedStream):
    """`GuardedStream` on `chat.completion.chunk`s: every text of each choice's delta (and of the
    choice), a text of its own for the stream guard."""

    BODY = "delta"
    KNOWN = CHAT_KNOWN

    def _withhold(self, choice: dict[str, Any]) -> None:
        delta = choice.get("delta")
        choice["delta"] = {"role": delta["role"]} if isinstance(delta, dict) and "role" in delta else {}


def at_path(verdict: Verdict, paths: list[str]) -> Verdict:
    """An input verdict of text i named by its path, as verdicts on other fields are."""
    if verdict.index is None or not 0 <= verdict.index < len(paths):
        return verdict
    return verdict.placed(None, paths[verdict.index])


def violation(verdict: Verdict, policy: str) -> GuardrailViolation:
    error = GuardrailViolation(verdict)
    error.policy = policy
    return error
