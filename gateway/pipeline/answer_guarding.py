"""Output checks on an answer, for both APIs: every text of each choice (`choice_texts`) checked
on its own, plain (`check_answer`) and streamed (`GuardedStream`, held back only where a pattern
could still complete). A deny withholds the choice, with nothing of it left but its index,
`finish_reason: content_filter` and empty texts; a redaction rewrites the text in place and drops
what spelled the old one (logprobs, token ids). Verdicts carry the choice's index, one per check
and choice. Chat's shape: `chat_guarding`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import replace
from typing import Any, ClassVar

import orjson

from gateway.pipeline.choice_texts import NOT_TEXT, Path, append_text, choice_texts, forget_tokens, withhold_rest
from gateway.pipeline.guarding import GuardedCall
from policies.guardrails import BODY_FIELD, GuardrailViolation, StreamGuard, StreamStep, Verdict, results_body
from policies.guardrails.base import TextKind
from policies.guardrails.verdict import SEVERITY
from providers.base import CompletionResult, CompletionStream

COMPLETIONS_KNOWN = frozenset({"index", "text", "logprobs", "finish_reason"})  # a choice's fields we know


async def check_result(guarded: GuardedCall, result: CompletionResult) -> CompletionResult:
    """The answer with denied choices withheld (`finish_reason: content_filter`) or redacted, and
    its verdicts; a deny whose policy names a status raises it instead."""
    return await check_answer(guarded, result, None, COMPLETIONS_KNOWN, _withhold_text)


def _withhold_text(choice: dict[str, Any]) -> None:
    choice["text"] = ""


async def check_answer(
    guarded: GuardedCall,
    result: CompletionResult,
    body: str | None,
    known: frozenset[str],
    withhold: Callable[[dict[str, Any]], None],
) -> CompletionResult:
    """`check_result` for either API: every text of each choice (`choice_texts`, `body` saying
    where they are), checked on its own; a deny withholds its choice (`withhold` empties what
    carries its texts, and nothing the gateway does not know stays), a redaction rewrites it."""
    answer = result.body
    choices = [c for c in answer.get("choices") or [] if isinstance(c, dict)]
    if guarded.output:
        texts = [(position, text) for position, choice in enumerate(choices) for text in choice_texts(choice, body)]
        kinds: list[TextKind] = ["text" if text.kind == "whole" else text.kind for _, text in texts]
        outcome = await guarded.output.check([text.value for _, text in texts], guarded.facts, kinds)
        choice_of = [_index_of(choices[position], position) for position, _ in texts]
        guarded.verdicts += per_choice(outcome.verdicts, choice_of)
        first_denied = outcome.first_denied
        if outcome.deny_status is not None and first_denied is not None:
            raise GuardrailViolation(on_choice(first_denied, choice_of), status=outcome.deny_status)
        denied: set[int] = set()
        changed: set[int] = set()
        for (position, text), checked in zip(texts, outcome.choices, strict=True):
            if checked.denied is not None:
                denied.add(position)
            elif checked.text != text.value:
                text.set(checked.text)
                changed.add(position)
        for position, choice in enumerate(choices):
            if position in denied:
                choice["finish_reason"] = "content_filter"
                withhold(choice)
                withhold_rest(choice, known)
            elif position in changed:
                forget_tokens(choice, known)
    answer[BODY_FIELD] = results_body(guarded.verdicts)
    return CompletionResult(orjson.dumps(answer), answer)


def _index_of(choice: dict[str, Any], position: int) -> int:
    index = choice.get("index", position)
    return index if isinstance(index, int) else position


def on_choice(verdict: Verdict, choice_of: list[int]) -> Verdict:
    """An output verdict of text i carrying the index of the choice that text belongs to."""
    if verdict.index is None or not 0 <= verdict.index < len(choice_of):
        return verdict
    return replace(verdict, index=choice_of[verdict.index])


def per_choice(verdicts: Iterable[Verdict], choice_of: list[int]) -> list[Verdict]:
    """One verdict per check and choice (the worst of its texts'), in first-seen order."""
    worst: dict[tuple[str, int | None], Verdict] = {}
    for verdict in (on_choice(v, choice_of) for v in verdicts):
        key = (verdict.check, verdict.index)
        seen = worst.get(key)
        if seen is None or SEVERITY[verdict.verdict] > SEVERITY[seen.verdict]:
            worst[key] = verdict
    return list(worst.values())


class GuardedStream:
    """The upstream stream with every text of each choice (`choice_texts`) checked as it flows:
    held back only where a pattern could still complete, redacted in place, cut with
    `content_filter` on a deny. Each text is one of the stream guard's (keys allocated as they
    appear); `BODY`, `KNOWN` and `_withhold` say the API's shape (completions here)."""

    BODY: ClassVar[str | None] = None  # where a chunk's choice carries its texts (chat: `delta`)
    KNOWN: ClassVar[frozenset[str]] = COMPLETIONS_KNOWN

    def __init__(self, stream: CompletionStream, guarded: GuardedCall) -> None:
        self._stream = stream
        self._guarded = guarded
        self._guard: StreamGuard = guarded.output.stream(guarded.facts)
        self._stopped: set[int] = set()
        self._last: dict[str, Any] = {}
        self._keys: dict[tuple[int, Path], int] = {}  # (choice, text's path) -> guard key
        self._choice_of: list[int] = []  # guard key -> choice

    async def __aiter__(self) -> AsyncIterator[list[bytes]]:
        async for payloads in self._stream:
            out = [await self._check(payload) for payload in payloads]
            yield [payload for payload in out if payload is not None]
        self._guarded.verdicts += per_choice(self._guard.verdicts(), self._choice_of)
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
        kept = [choice for choice in choices if isinstance(choice, dict) and await self._check_choice(choice)]
        if not kept:
            return None
        chunk["choices"] = kept
        return orjson.dumps(chunk)

    def _key(self, choice: int, path: Path | None) -> int:
        """The guard key of a choice's text (None: a whole text, a key of its own)."""
        key = self._keys.get((choice, path)) if path is not None else None
        if key is None:
            key = len(self._choice_of)
            self._choice_of.append(choice)
            if path is not None:
                self._keys[choice, path] = key
        return key

    async def _check_choice(self, choice: dict[str, Any]) -> bool:
        """Rewrites `choice` in place; False when nothing of it may be sent."""
        index = choice.get("index", 0)
        if not isinstance(index, int) or index in self._stopped:
            return False
        reason: str | None = None
        changed = False
        for text in choice_texts(choice, self.BODY):
            original = text.value
            if text.kind == "whole":  # checked as it comes: clients do not join these
                key = self._key(index, None)
                step = self._guard.feed(key, original, "text")
                if step.finish_reason is None:
                    end = await self._guard.finish(key)
                    step = StreamStep(step.text + end.text, end.finish_reason, end.denied)
            else:
                step = self._guard.feed(self._key(index, text.path), original, text.kind)
            changed |= step.text != original
            text.set(step.text)
            if step.finish_reason is not None:
                reason = step.finish_reason
                break
        if reason is None and choice.get("finish_reason") is not None:
            ended, appended = await self._finish(index, choice)
            reason, changed = ended or choice["finish_reason"], changed or appended
        if reason is not None:
            self._stopped.add(index)
            choice["finish_reason"] = reason
            if reason == "content_filter":  # nothing more of this choice: not the rest of this chunk either
                self._withhold(choice)
                withhold_rest(choice, self.KNOWN)
        if changed:
            forget_tokens(choice, self.KNOWN)
        carrier = choice.get(self.BODY) if self.BODY else {k: v for k, v in choice.items() if k not in NOT_TEXT}
        sent = carrier.values() if isinstance(carrier, dict) else ()
        return reason is not None or any(value not in (None, "", []) for value in sent)

    def _withhold(self, choice: dict[str, Any]) -> None:
        choice["text"] = ""

    async def _finish(self, index: int, choice: dict[str, Any]) -> tuple[str | None, bool]:
        """The upstream ended choice `index`: the rest of each of its texts, added to `choice`;
        the finish_reason a check imposed, if one did, and whether anything was added."""
        added = False
        for (owner, path), key in list(self._keys.items()):
            if owner != index:
                continue
            end = await self._guard.finish(key)
            if end.text:
                append_text(choice, path, end.text)
                added = True
            if end.finish_reason is not None:
                return end.finish_reason, added
        return None, added
