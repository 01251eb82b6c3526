"""The texts of a (valid) Messages body that its model reads, each where it sits, so that an input
redaction made on the chat view can be written into the body an Anthropic deployment is sent as
it came (`gateway.pipeline.native.redaction`), leaving `cache_control` and thinking as they were.

Read: `system` (a string, or its blocks' texts), each turn's string content and its blocks' texts
(a text block; a document's text source and title; an image's URL; a tool result's content, a
string or its text blocks; every string of a `tool_use` input, its keys `fixed`), each tool's
description and every string of its input schema (keys `fixed`), `metadata.user_id` and
`stop_sequences`: what the chat view (`gateway.api.messages.request`) carries, piece by piece.
Not read: identifiers (ids, tool names, types), `cache_control`, media bytes, and thinking and
redacted_thinking blocks: the model's own earlier output, signed by Anthropic (a rewritten one is
refused when sent back), going back to where it came from.
"""

from __future__ import annotations

from typing import Any

from gateway.api.body_texts import BodyText, free_texts, string_at


def body_texts(body: dict[str, Any]) -> list[BodyText]:
    """Every text of `body` (see the module), in the body's order."""
    found: list[BodyText] = []
    system = body.get("system")
    if isinstance(system, str):
        found.append(BodyText(body, "system", "system", system=True))
    elif isinstance(system, list):
        for position, block in enumerate(system):
            string_at(block, "text", f"system[{position}]", found, system=True)
    for position, turn in enumerate(body.get("messages") or ()):
        if isinstance(turn, dict):
            _turn(turn, f"messages[{position}]", found)
    for position, tool in enumerate(body.get("tools") or ()):
        if isinstance(tool, dict):
            string_at(tool, "description", f"tools[{position}]", found)
            free_texts(tool.get("input_schema"), f"tools[{position}].input_schema", found)
    metadata = body.get("metadata")
    if isinstance(metadata, dict):
        string_at(metadata, "user_id", "metadata", found)
    stops = body.get("stop_sequences")
    if isinstance(stops, list):
        free_texts(stops, "stop_sequences", found)
    return found


def _turn(turn: dict[str, Any], at: str, found: list[BodyText]) -> None:
    content = turn.get("content")
    if isinstance(content, str):
        found.append(BodyText(turn, "content", f"{at}.content"))
        return
    for position, block in enumerate(content if isinstance(content, list) else ()):
        if isinstance(block, dict):
            _block(block, f"{at}.content[{position}]", found)


def _block(block: dict[str, Any], at: str, found: list[BodyText]) -> None:
    kind = block.get("type")
    if kind == "text":
        string_at(block, "text", at, found)
    elif kind == "tool_use":
        free_texts(block.get("input"), f"{at}.input", found)
    elif kind == "tool_result":
        content = block.get("content")
        if isinstance(content, str):
            found.append(BodyText(block, "content", f"{at}.content"))
        for position, inner in enumerate(content if isinstance(content, list) else ()):
            if isinstance(inner, dict) and inner.get("type") == "text":
                string_at(inner, "text", f"{at}.content[{position}]", found)
    elif kind in ("document", "image"):
        source = block.get("source")
        if isinstance(source, dict) and source.get("type") in ("text", "url"):
            string_at(source, "data" if source["type"] == "text" else "url", f"{at}.source", found)
        if kind == "document":
            string_at(block, "title", at, found)
