"""A Responses body that a native deployment may be sent as it came (`responses: native`), beside
the chat view the pipeline reads (routing, input guardrails, limits) and a bridged deployment is
sent.

What the bridge cannot carry is not a 400 until the route says where the body goes: an input item
it has no place for (a built-in tool's call or output, an item reference, an image by file id) is
left out of the chat view, and a `tool_choice` that requires a built-in tool too, each with the
400 a bridged deployment gives (`Leniency.problems`, raised once the route's first candidate is
known not to speak the Responses API itself). A native deployment gets them as they came.

`previous_response_id`, on a native deployment, is passed through to the upstream when the response
it names was that deployment's own answer, relayed as it came (the upstream holds the same
conversation the gateway stored); otherwise the chain the gateway stored is written into `input`
(`rebuilt`), as the bridge writes it into the chat view: input items and outputs the bridge carries,
without reasoning items (the model's earlier thoughts are not resent).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gateway.api.errors import InvalidRequest
from gateway.api.responses.items import Item, check_item
from gateway.api.responses.request import ResponsesRequest
from gateway.api.responses.tools import BridgedTools, bridge_tool_choice, bridge_tools


@dataclass(slots=True)
class Leniency:
    """What the chat view is bridged from (`Bridge(request, items, tools)`), and what it left out
    (each the 400 a bridged deployment gives)."""

    items: list[Item]  # the input items it carries, checked
    tools: BridgedTools
    without_choice: bool = False  # its `tool_choice` left out: it requires a tool the bridge drops
    problems: list[InvalidRequest] = field(default_factory=list)


def lenient_view(request: ResponsesRequest) -> Leniency:
    """The input items and tools of `request` (validated) that the chat view carries, without what
    only a native deployment takes."""
    source = request.input
    tools = bridge_tools(request.tools)
    if isinstance(source, str):
        found = Leniency([{"type": "message", "role": "user", "content": source}], tools)
    else:
        found = Leniency([], tools)
        for position, item in enumerate(source):
            try:
                check_item(item, f"input[{position}]")
            except InvalidRequest as problem:
                found.problems.append(problem)
            else:
                found.items.append(item)
        if not found.items:  # nothing a chat view could hold: refused as the bridge refuses it
            raise found.problems[0]
    if request.tool_choice is not None:
        try:
            bridge_tool_choice(request.tool_choice, tools)
        except InvalidRequest as problem:
            if problem.param != "tool_choice":
                raise
            found.problems.append(problem)
            found.without_choice = True
    return found


def rebuilt(payload: dict[str, Any], history: list[Item]) -> dict[str, Any]:
    """`payload` with the chain behind its previous_response_id written into `input` instead."""
    own = payload.get("input")
    items = [{"type": "message", "role": "user", "content": own}] if isinstance(own, str) else list(own or ())
    earlier = [item for item in history if item.get("type") != "reasoning"]
    body = {name: value for name, value in payload.items() if name != "previous_response_id"}
    body["input"] = earlier + items
    return body
