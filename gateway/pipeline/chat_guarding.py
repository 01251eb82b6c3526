"""The guardrails step for `/v1/chat/completions`: the same guards as completions (see `guarding`),
on the texts of the chat shape.

Input checks read the text of every message, in order: string contents, text and refusal parts,
assistant tool-call arguments, tool results; each is checked on its own (as each prompt of a list
is), a deny names its path (`messages[2].content`), a redaction rewrites it in place. Fields the
Chat Completions reference does not know are checked as for completions. A length cap clamps
`max_completion_tokens` (or `max_tokens` when that is what the client sent).

Output checks read every text of each choice (`choice_texts`: content, refusal, reasoning, tool-call
and function-call arguments and names, and every string of a field we do not know), as for
completions (`answer_guarding`): a deny withholds the choice
(`finish_reason: content_filter`, no texts at all), a redaction rewrites the text in place; on a
stream each text flows through the stream guard as it arrives.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gateway.api.chat import ChatRequest, message_texts
from gateway.pipeline.answer_guarding import GuardedStream, check_answer
from gateway.pipeline.guarding import GuardedCall
from policies.guardrails import GuardrailViolation, RequestFacts, Verdict
from policies.guardrails.guards import Guards
from providers.base import CompletionResult

KNOWN_FIELDS = frozenset(ChatRequest.model_fields)
INSTRUCTION_ROLES = frozenset({"system", "developer"})  # the application's, not its user's
CHAT_KNOWN = frozenset({"index", "message", "delta", "logprobs", "finish_reason"})  # a choice's fields we know


async def check_chat_input(guards: Guards, payload: dict[str, Any], context: str | None) -> GuardedCall:
    """400 on a deny (nothing is sent upstream); redacted texts replace the ones in `payload`."""
    limit_field = "max_tokens" if payload.get("max_completion_tokens") is None and "max_tokens" in payload else None
    limit_field = limit_field or "max_completion_tokens"
    limit = payload.get(limit_field)
    facts = RequestFacts(max_tokens=limit if isinstance(limit, int) else None, context=context)
    slots = message_texts(payload.get("messages"))
    verdicts: list[Verdict] = []
    clamps: list[int] = []
    # The application's own instructions are checked without the intent checks (guards.INTENT_CHECKS).
    instructions = [slot for slot in slots if _role(payload, slot[0]) in INSTRUCTION_ROLES]
    others = [slot for slot in slots if _role(payload, slot[0]) not in INSTRUCTION_ROLES]
    for guard, group in ((guards.for_instructions(), instructions), (guards.input, others)):
        if not group:
            continue
        outcome = await guard.check([holder[key] for _, holder, key in group], facts)
        verdicts += [_at(verdict, group) for verdict in outcome.verdicts]
        if outcome.denied is not None:
            raise _violation(_at(outcome.denied, group), guards.policy)
        if outcome.changed:
            for (_, holder, key), text in zip(group, outcome.prompt, strict=True):
                holder[key] = text
        if outcome.max_tokens is not None:
            clamps.append(outcome.max_tokens)
    fields = {name: value for name, value in payload.items() if name not in KNOWN_FIELDS and value is not None}
    if fields:
        checked = await guards.input.check_fields(fields, facts)
        verdicts += checked.verdicts
        if checked.denied is not None:
            raise _violation(checked.denied, guards.policy)
        payload.update(checked.values)
        if checked.max_tokens is not None:
            clamps.append(checked.max_tokens)
    if clamps:
        payload[limit_field] = min([*clamps, *([limit] if isinstance(limit, int) else [])])
    asked = [holder[key] for path, holder, key in slots if _role(payload, path) == "user"]
    n = payload.get("n")
    output_facts = RequestFacts(
        max_tokens=payload.get(limit_field),
        prompts=(asked[-1],) if asked else (),
        n=n if isinstance(n, int) else 1,
        context=context,
    )
    return GuardedCall(guards.output, output_facts, guards.policy, verdicts)


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


def _role(payload: dict[str, Any], path: str) -> Any:
    position = int(path[len("messages[") : path.index("]")])
    message = payload["messages"][position]
    return message.get("role") if isinstance(message, dict) else None


def _at(verdict: Verdict, slots: list[Any]) -> Verdict:
    """An input verdict of text i named by its path, as verdicts on other fields are."""
    if verdict.index is None or not 0 <= verdict.index < len(slots):
        return verdict
    return replace(verdict, index=None, field=slots[verdict.index][0])


def _violation(verdict: Verdict, policy: str) -> GuardrailViolation:
    error = GuardrailViolation(verdict)
    error.policy = policy
    return error
