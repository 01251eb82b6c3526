"""Output checks on a Responses answer a deployment gave itself (native pass-through), rewritten in
place.

The texts of a `response` the checks read, and as what (`TextKind`, as the chat view's texts are
read by `answer_guarding`): a message's output text is the answer (every check); its refusal, and
a reasoning item's summary and reasoning texts, are texts of their own; a function call's arguments
are JSON (checked as the value they spell, redacted so that they stay JSON) and its name a whole
text, as are a custom tool call's input and name. Built-in tools' items (web and file searches,
code interpreter, …) are relayed as they came. A `response` is one choice: a deny withholds all of
its output (none left; `status: "incomplete"` with `incomplete_details.reason: "content_filter"`,
the Responses API's own for a filtered answer; usage kept), or raises the status its policy names;
a redaction rewrites the text where it is (an output text's logprobs, which spelled the old text,
dropped), and everything else (ids, annotations, fields the gateway does not know) stays as it
came. An answer the checks leave as it was goes out byte for byte.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.pipeline.guarding import GuardedCall
from gateway.pipeline.native.checks import Checked, Slot, check_slots
from policies.guardrails.base import TextKind
from providers.base import CompletionResult

# A message's content part's text: its field, and what kind of text it is.
PART_TEXTS: dict[str, tuple[str, TextKind]] = {"output_text": ("text", "answer"), "refusal": ("refusal", "text")}
# A tool call's text besides its name: its field, and what kind of text it is.
CALL_TEXTS: dict[str, tuple[str, TextKind]] = {
    "function_call": ("arguments", "json"),
    "custom_tool_call": ("input", "text"),
}
# Why an answer a check ended is incomplete: a deny, or a length cap that truncates it.
INCOMPLETE = {"content_filter": "content_filter", "length": "max_output_tokens"}


def item_slots(item: dict[str, Any]) -> list[Slot]:
    """The texts of one output item the checks read."""
    kind = item.get("type")
    slots: list[Slot] = []
    if kind == "message":
        for part in item.get("content") or ():
            found = PART_TEXTS.get(str(part.get("type"))) if isinstance(part, dict) else None
            if found is not None and isinstance(part.get(found[0]), str):
                slots.append(Slot(part, *found))
    elif kind == "reasoning":
        for name in ("summary", "content"):
            for part in item.get(name) or ():
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    slots.append(Slot(part, "text", "text"))
    elif kind in ("function_call", "custom_tool_call"):
        if isinstance(item.get("name"), str):
            slots.append(Slot(item, "name", "text"))
        field, text_kind = CALL_TEXTS[kind]
        if isinstance(item.get(field), str):
            slots.append(Slot(item, field, text_kind))
    return slots


def withhold(response: dict[str, Any], reason: str, output: list[Any]) -> None:
    """`response` ended by a check: incomplete for `reason` (a stream guard's), `output` what is left."""
    response["status"] = "incomplete"
    response["incomplete_details"] = {"reason": INCOMPLETE.get(reason, "content_filter")}
    response["output"] = output


async def check_responses_answer(guarded: GuardedCall, result: CompletionResult) -> CompletionResult:
    """`result` (a native `response`) as the output checks leave it; its verdicts join `guarded`'s."""
    if not guarded.output:
        return result
    response = orjson.loads(result.raw)  # the provider read it as a JSON object
    slots = [slot for item in response.get("output") or () if isinstance(item, dict) for slot in item_slots(item)]
    checked = await check_slots(guarded, slots)
    if checked is Checked.DENIED:
        withhold(response, "content_filter", [])
    elif checked is Checked.SAME:
        return result
    for slot in slots:
        if slot.written and slot.kind == "answer" and slot.holder.get("logprobs"):
            slot.holder["logprobs"] = []  # they spelled the text before its redaction
    return CompletionResult(orjson.dumps(response), result.body, native=True)
