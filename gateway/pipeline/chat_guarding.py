"""The guardrails step for `/v1/chat/completions`: the same guards as completions (see `guarding`),
on the texts of the chat shape.

Input checks read the text of every message, in order: string contents, text and refusal parts,
assistant tool-call arguments, tool results; each is checked on its own (as each prompt of a list
is), a deny names its path (`messages[2].content`), a redaction rewrites it in place. Fields the
Chat Completions reference does not know are checked as for completions. A length cap clamps
`max_completion_tokens` (or `max_tokens` when that is what the client sent).

Output checks read each choice's assistant content and its tool-call arguments: a deny withholds
the choice (`finish_reason: content_filter`, no content, no tool calls), a redaction rewrites the
text in place. On a stream, each choice's content and each tool call's arguments flow through the
stream guard as they arrive (redacted across chunk borders, cut with `content_filter` on a deny).
Verdicts carry the choice's index, as they do for completions.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import orjson

from gateway.api.chat import ChatRequest, message_texts
from gateway.pipeline.guarding import GuardedCall, GuardedStream
from policies.guardrails import BODY_FIELD, GuardrailViolation, RequestFacts, Verdict, results_body
from policies.guardrails.guards import Guards
from providers.base import CompletionResult, CompletionStream

KNOWN_FIELDS = frozenset(ChatRequest.model_fields)
INSTRUCTION_ROLES = frozenset({"system", "developer"})  # the application's, not its user's


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
    body = result.body
    choices = [c for c in body.get("choices") or [] if isinstance(c, dict)]
    if guarded.output:
        slots: list[tuple[int, dict[str, Any], str]] = []  # (choice, holder, key) of every text
        for position, choice in enumerate(choices):
            message = choice.get("message")
            if isinstance(message, dict):
                slots += [(position, holder, key) for holder, key in _answer_texts(message)]
        choice_of = [position for position, _, _ in slots]
        outcome = await guarded.output.check([holder[key] for _, holder, key in slots], guarded.facts)
        guarded.verdicts += [_on_choice(verdict, choice_of, choices) for verdict in outcome.verdicts]
        first_denied = outcome.first_denied
        if outcome.deny_status is not None and first_denied is not None:
            raise GuardrailViolation(_on_choice(first_denied, choice_of, choices), status=outcome.deny_status)
        denied: set[int] = set()
        changed: set[int] = set()
        for (position, holder, key), checked in zip(slots, outcome.choices, strict=True):
            if checked.denied is not None:
                denied.add(position)
            elif checked.text != holder[key]:
                holder[key] = checked.text
                changed.add(position)
        for position, choice in enumerate(choices):
            if position in denied:
                choice.update(finish_reason="content_filter", logprobs=None)
                choice["message"] = {"role": "assistant", "content": None, "refusal": None}
            elif position in changed:
                choice["logprobs"] = None  # the tokens no longer spell the text
    body[BODY_FIELD] = results_body(guarded.verdicts)
    return CompletionResult(orjson.dumps(body), body)


def _answer_texts(message: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    """(holder, key) of the assistant's content and of each tool call's arguments."""
    found = [(message, "content")] if isinstance(message.get("content"), str) else []
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict) and isinstance(function.get("arguments"), str):
            found.append((function, "arguments"))
    return found


class ChatGuardedStream(GuardedStream):
    """`GuardedStream` on `chat.completion.chunk`s: each choice's content, and each of its tool calls'
    arguments, is a text of its own for the stream guard (keys allocated as they appear)."""

    def __init__(self, stream: CompletionStream, guarded: GuardedCall) -> None:
        super().__init__(stream, guarded)
        self._keys: dict[tuple[int, int], int] = {}  # (choice, tool call; -1 for content) -> guard key
        self._choice_of: list[int] = []  # guard key -> choice

    async def __aiter__(self) -> AsyncIterator[list[bytes]]:
        async for payloads in self._stream:
            out = [await self._check(payload) for payload in payloads]
            yield [payload for payload in out if payload is not None]
        self._guarded.verdicts += [_on_choice(v, self._choice_of) for v in self._guard.verdicts()]
        final = {key: self._last[key] for key in ("id", "object", "created", "model") if key in self._last}
        yield [orjson.dumps({**final, "choices": [], BODY_FIELD: results_body(self._guarded.verdicts)})]

    def _key(self, choice: int, part: int) -> int:
        key = self._keys.get((choice, part))
        if key is None:
            key = self._keys[choice, part] = len(self._choice_of)
            self._choice_of.append(choice)
        return key

    async def _check_choice(self, choice: dict[str, Any]) -> bool:
        """Rewrites `choice` in place; False when nothing of it may be sent."""
        index = choice.get("index", 0)
        if index in self._stopped:
            return False
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            delta = choice["delta"] = {}
        texts = [(delta, "content", -1)] if isinstance(delta.get("content"), str) else []
        for call in delta.get("tool_calls") or ():
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict) and isinstance(function.get("arguments"), str):
                texts.append((function, "arguments", call.get("index", 0)))
        reason: str | None = None
        changed = False
        for holder, name, part in texts:
            step = self._guard.feed(self._key(index, part), holder[name])
            changed |= step.text != holder[name]
            holder[name] = step.text
            if step.finish_reason is not None:
                reason = step.finish_reason
                break
        if reason is None and choice.get("finish_reason") is not None:
            reason = await self._finish(index, delta) or choice["finish_reason"]
            changed = True
        if reason is not None:
            self._stopped.add(index)
            choice["finish_reason"] = reason
            if reason == "content_filter":  # nothing more of this choice: not the rest of this delta either
                choice["delta"] = {name: value for name, value in delta.items() if name == "role"}
        if changed:
            choice["logprobs"] = None
        return reason is not None or any(value not in (None, "", []) for value in choice["delta"].values())

    async def _finish(self, index: int, delta: dict[str, Any]) -> str | None:
        """The upstream ended choice `index`: the rest of each of its texts, appended to `delta`;
        the finish_reason a check imposed, if one did."""
        for (choice, part), key in list(self._keys.items()):
            if choice != index:
                continue
            end = await self._guard.finish(key)
            if end.text and part < 0:
                delta["content"] = (delta.get("content") or "") + end.text
            elif end.text:
                delta.setdefault("tool_calls", []).append({"index": part, "function": {"arguments": end.text}})
            if end.finish_reason is not None:
                return end.finish_reason
        return None


def _role(payload: dict[str, Any], path: str) -> Any:
    position = int(path[len("messages[") : path.index("]")])
    message = payload["messages"][position]
    return message.get("role") if isinstance(message, dict) else None


def _at(verdict: Verdict, slots: list[Any]) -> Verdict:
    """An input verdict of text i named by its path, as verdicts on other fields are."""
    if verdict.index is None or not 0 <= verdict.index < len(slots):
        return verdict
    return replace(verdict, index=None, field=slots[verdict.index][0])


def _on_choice(verdict: Verdict, choice_of: list[int], choices: list[dict[str, Any]] | None = None) -> Verdict:
    """An output verdict of text i carrying the index of the choice that text belongs to
    (`choices`: a whole answer's, whose own `index` fields name them)."""
    if verdict.index is None or not 0 <= verdict.index < len(choice_of):
        return verdict
    position = choice_of[verdict.index]
    index = choices[position].get("index", position) if choices is not None else position
    return replace(verdict, index=index if isinstance(index, int) else position)


def _violation(verdict: Verdict, policy: str) -> GuardrailViolation:
    error = GuardrailViolation(verdict)
    error.policy = policy
    return error
