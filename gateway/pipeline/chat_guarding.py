"""The guardrails step for `/v1/chat/completions`: the same guards as completions (see `guarding`),
on the texts of the chat shape.

Input checks read every text of the request the upstream's model reads (`gateway.api.chat_texts`:
messages, tools and their schemas, tool_choice, response_format, unknown fields at every level, keys
included), each distinct text checked once, on its own (as each prompt of a list is); a deny names
its path (`tools[0].function.description`), a redaction rewrites it in place, and a redaction of a
key or of a name other fields refer to is refused (400 naming it). The leading system/developer
messages skip the intent checks when the policies trust them (`Guards.instructions`). A length cap
clamps `max_completion_tokens` (or `max_tokens` when that is what the client sent).

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

from gateway.api.chat_texts import Text, chat_texts, leading_instructions
from gateway.pipeline.guarding import GuardedCall, GuardedStream
from policies.guardrails import BODY_FIELD, GuardrailViolation, InputGuard, RequestFacts, Verdict, results_body
from policies.guardrails.guards import Guards
from providers.base import CompletionResult, CompletionStream


async def check_chat_input(guards: Guards, payload: dict[str, Any], context: str | None) -> GuardedCall:
    """400 on a deny (nothing is sent upstream); redacted texts replace the ones in `payload`."""
    limit_field = "max_tokens" if payload.get("max_completion_tokens") is None and "max_tokens" in payload else None
    limit_field = limit_field or "max_completion_tokens"
    limit = payload.get(limit_field)
    facts = RequestFacts(max_tokens=limit if isinstance(limit, int) else None, context=context)
    texts = [text for text in chat_texts(payload).texts if text.text]
    verdicts: list[Verdict] = []
    clamps: list[int] = []
    # The application's own instructions (the leading system/developer messages) are checked
    # without the intent checks when its policies trust them (guards.instructions).
    leading = leading_instructions(payload.get("messages")) if guards.instructions is not None else 0
    instructions = [text for text in texts if 0 <= text.message < leading]
    others = [text for text in texts if not 0 <= text.message < leading] if instructions else texts
    for guard, group in ((guards.for_instructions(), instructions), (guards.input, others)):
        if group:
            clamp = await _check_texts(guard, group, facts, verdicts, guards.policy)
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
    return GuardedCall(guards.output, output_facts, guards.policy, verdicts)


async def _check_texts(
    guard: InputGuard, group: list[Text], facts: RequestFacts, verdicts: list[Verdict], policy: str
) -> int | None:
    """Check each distinct text of `group` once; raise on a deny, or on a redaction of a fixed text
    (a key or an identifier, which cannot be rewritten); else rewrite the redacted texts in place.
    The length cap's clamp, if one applied."""
    first: dict[str, Text] = {}
    for text in group:
        first.setdefault(text.text, text)
    paths = [text.path for text in first.values()]
    outcome = await guard.check(list(first), facts)
    verdicts += [_at(verdict, paths) for verdict in outcome.verdicts]
    if outcome.denied is not None:
        raise _violation(_at(outcome.denied, paths), policy)
    if outcome.changed:
        redacted = dict(zip(first, outcome.prompt, strict=True))
        changed = [text for text in group if redacted[text.text] != text.text]
        fixed = next((text for text in changed if text.fixed), None)
        if fixed is not None:
            reason = "a check would redact it, and a key or a name other fields refer to cannot be rewritten"
            raise _violation(Verdict("guardrails", "input", "deny", reason, field=fixed.path), policy)
        for text in changed:
            text.holder[text.key] = redacted[text.text]
    return outcome.max_tokens


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


def _at(verdict: Verdict, paths: list[str]) -> Verdict:
    """An input verdict of text i named by its path, as verdicts on other fields are."""
    if verdict.index is None or not 0 <= verdict.index < len(paths):
        return verdict
    return replace(verdict, index=None, field=paths[verdict.index])


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
