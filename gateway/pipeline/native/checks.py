"""What the output checks of every native answer share, whichever API it speaks (the Messages
API's, the Responses API's): the texts of a plain answer checked in one batch where they sit
(`check_slots`), and a stream's events checked as they flow through the stream guard
(`EventGuard`), each text of the answer one of the guard's texts. An answer is one choice: its
verdicts carry index 0, one per check."""

from __future__ import annotations

from collections.abc import AsyncIterator
from enum import Enum
from typing import Any

import orjson

from gateway.pipeline.answer_guarding import on_choice, per_choice
from gateway.pipeline.guarding import GuardedCall
from policies.guardrails import GuardrailViolation, StreamGuard
from policies.guardrails.base import TextKind
from providers.base import CompletionStream


class Slot:
    """One text of an answer: `holder[field]`, read by the checks as `kind`. `encoded`: the value is
    JSON itself (a `tool_use` input), checked as its JSON text and written back decoded."""

    __slots__ = ("encoded", "field", "holder", "kind", "written")

    def __init__(self, holder: dict[str, Any], field: str, kind: TextKind, *, encoded: bool = False) -> None:
        self.holder = holder
        self.field = field
        self.kind = kind
        self.encoded = encoded
        self.written = False  # a redaction rewrote it

    def read(self) -> str:
        value = self.holder.get(self.field, {} if self.encoded else "")
        return orjson.dumps(value).decode() if self.encoded else str(value)

    def write(self, text: str) -> None:
        self.holder[self.field] = orjson.loads(text) if self.encoded else text
        self.written = True


class Checked(Enum):
    SAME = "same"  # nothing to change: the answer goes out as it came
    CHANGED = "changed"  # a redaction, written where the text sits
    DENIED = "denied"  # withhold the answer (how: the API's own way)


async def check_slots(guarded: GuardedCall, slots: list[Slot]) -> Checked:
    """Check the texts of one answer in one batch; their verdicts join `guarded`'s. A deny whose
    policy names a status raises it; a redaction is written into its slot."""
    texts = [slot.read() for slot in slots]
    one_choice = [0] * len(texts)
    outcome = await guarded.output.check(texts, guarded.facts, [slot.kind for slot in slots])
    guarded.verdicts += per_choice(outcome.verdicts, one_choice)
    denied = outcome.first_denied
    if denied is not None and outcome.deny_status is not None:
        raise GuardrailViolation(on_choice(denied, one_choice), status=outcome.deny_status)
    if denied is not None:
        return Checked.DENIED
    changed = Checked.SAME
    for slot, text, checked in zip(slots, texts, outcome.choices, strict=True):
        if checked.text != text:
            slot.write(checked.text)
            changed = Checked.CHANGED
    return changed


class EventGuard:
    """A native stream whose events `_check` reads, writing what may go out into `out`, in order;
    a read of the upstream whose events are all withheld writes nothing. Its verdicts join the
    call's once the stream ended."""

    def __init__(self, stream: CompletionStream, guarded: GuardedCall) -> None:
        self._stream = stream
        self._guarded = guarded
        self._guard: StreamGuard = guarded.output.stream(guarded.facts)
        self._keys = 0  # guard keys given out

    async def __aiter__(self) -> AsyncIterator[list[bytes]]:
        async for payloads in self._stream:
            out: list[bytes] = []
            for payload in payloads:
                await self._check(payload, out)
            if out:
                yield out
        self._guarded.verdicts += per_choice(self._guard.verdicts(), [0] * self._keys)

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def _check(self, payload: bytes, out: list[bytes]) -> None:
        raise NotImplementedError

    def _key(self) -> int:
        """A new text's key in the stream guard."""
        self._keys += 1
        return self._keys - 1
