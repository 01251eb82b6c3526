"""Responses tools as chat tools: function tools as they are, Codex-style namespaces flattened into
function tools (`<namespace>__<name>`, named back on the way out), custom tools as chat's custom.

Built-in tools (web_search, file_search, code_interpreter, …) run only where the model's host
runs them; a chat deployment has none, so they are left out of the upstream call and named to the
client (clients such as Codex offer them on every call). A `tool_choice` that requires one of them
cannot be honoured: a 400 naming it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from gateway.api.errors import InvalidRequest

_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
SEPARATOR = "__"


@dataclass(slots=True)
class BridgedTools:
    tools: list[dict[str, Any]] = field(default_factory=list)  # chat tools
    dropped: list[str] = field(default_factory=list)  # built-in tool types left out
    flattened: dict[str, tuple[str, str]] = field(default_factory=dict)  # chat name -> (namespace, name)
    # (chat definition, client tool): a description the input guardrails redact is echoed redacted
    described: list[tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=list)

    def names(self) -> dict[tuple[str, str], str]:
        return {qualified: flat for flat, qualified in self.flattened.items()}


def _bad(path: str, message: str) -> InvalidRequest:
    return InvalidRequest(f"Invalid '{path}': {message}.", param=path, code="invalid_value")


def bridge_tools(tools: list[Any] | None) -> BridgedTools:
    bridged = BridgedTools()
    for index, tool in enumerate(tools or []):
        path = f"tools[{index}]"
        if not isinstance(tool, dict) or not isinstance(tool.get("type"), str):
            raise _bad(f"{path}.type", "each tool must be an object with a 'type'")
        kind = tool["type"]
        if kind in ("function", "custom"):
            bridged.tools.append(_tool(tool, path, tool.get("name")))
            bridged.described.append((_definition(bridged.tools[-1]), tool))
        elif kind == "namespace":
            _namespace(bridged, tool, path)
        elif kind not in bridged.dropped:
            bridged.dropped.append(kind)
    return bridged


def _tool(tool: dict[str, Any], path: str, name: Any) -> dict[str, Any]:
    if not isinstance(name, str) or not _NAME.match(name):
        raise _bad(f"{path}.name", "must be 1 to 64 letters, digits, underscores or dashes")
    if tool["type"] == "custom":
        custom = {"name": name, **{k: tool[k] for k in ("description", "format") if tool.get(k) is not None}}
        return {"type": "custom", "custom": custom}
    parameters = tool.get("parameters")
    if parameters is not None and not isinstance(parameters, dict):
        raise _bad(f"{path}.parameters", "must be a JSON Schema object")
    function = {
        "name": name,
        **{k: tool[k] for k in ("description", "parameters", "strict") if tool.get(k) is not None},
    }
    return {"type": "function", "function": function}


def _namespace(bridged: BridgedTools, tool: dict[str, Any], path: str) -> None:
    namespace = tool.get("name")
    if not isinstance(namespace, str) or not namespace:
        raise _bad(f"{path}.name", "a namespace needs a name")
    members = tool.get("tools")
    if not isinstance(members, list):
        raise _bad(f"{path}.tools", "must be an array of function tools")
    for index, member in enumerate(members):
        where = f"{path}.tools[{index}]"
        if not isinstance(member, dict) or member.get("type") not in ("function", "custom"):
            raise _bad(f"{where}.type", "must be 'function' or 'custom'")
        name = member.get("name")
        flat = f"{namespace}{SEPARATOR}{name}"
        if not isinstance(name, str) or not _NAME.match(flat):
            raise _bad(
                f"{where}.name",
                f"the flattened name '{namespace}{SEPARATOR}<name>' must be at most 64 "
                "letters, digits, underscores or dashes",
            )
        bridged.tools.append(_tool(member, where, flat))
        bridged.described.append((_definition(bridged.tools[-1]), member))
        bridged.flattened[flat] = (namespace, name)


def _definition(tool: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = tool.get("function") or tool.get("custom") or {}
    return found


def guarded_descriptions(bridged: BridgedTools) -> None:
    """Each description the chat body now holds otherwise (a guardrail redacted it) replaces the client's."""
    for definition, tool in bridged.described:
        value = definition.get("description")
        if isinstance(value, str) and value != tool.get("description"):
            tool["description"] = value


def bridge_tool_choice(choice: str | dict[str, Any] | None, bridged: BridgedTools) -> Any:
    """The chat `tool_choice`, or None to leave it out; a 400 when it requires a left-out tool."""
    if choice is None:
        return None
    if isinstance(choice, str):
        if choice == "required" and not bridged.tools:
            raise _bad(
                "tool_choice",
                "'required' needs a tool the deployment can call; "
                f"only built-in tools were given ({', '.join(bridged.dropped) or 'none'})",
            )
        return choice if bridged.tools else None
    kind = choice["type"]
    if kind in ("function", "custom", "allowed_tools") and not bridged.tools:
        raise _bad("tool_choice", "names a tool, but 'tools' holds none the deployment can call")
    if kind == "function":
        return {"type": "function", "function": {"name": _named(choice, bridged)}}
    if kind == "custom":
        return {"type": "custom", "custom": {"name": _named(choice, bridged)}}
    if kind == "allowed_tools":
        allowed = [
            {"type": "function", "function": {"name": tool.get("name")}}
            for tool in choice.get("tools", [])
            if isinstance(tool, dict) and tool.get("type") == "function"
        ]
        mode = choice.get("mode", "auto")
        return {"type": "allowed_tools", "allowed_tools": {"mode": mode, "tools": allowed}}
    raise _bad(
        "tool_choice",
        f"requires the built-in tool '{kind}', which this deployment does not run "
        "(only function and custom tools are bridged to a chat model)",
    )


def _named(choice: dict[str, Any], bridged: BridgedTools) -> str:
    name = choice.get("name")
    if not isinstance(name, str) or not name:
        raise _bad("tool_choice.name", "is required")
    namespace = choice.get("namespace")
    flat = bridged.names().get((namespace, name), name) if isinstance(namespace, str) else name
    declared = {(tool.get("function") or tool.get("custom") or {}).get("name") for tool in bridged.tools}
    if flat not in declared:
        raise _bad("tool_choice.name", f"'{name}' is not among 'tools'")
    return flat


def named_back(name: str, bridged_flat: dict[str, tuple[str, str]]) -> dict[str, str]:
    """The `name` (and `namespace`) of a call to a flattened tool, as the client declared it."""
    found = bridged_flat.get(name)
    return {"name": name} if found is None else {"name": found[1], "namespace": found[0]}
