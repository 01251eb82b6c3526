"""The texts of an answer's choice: every string the client receives in it, for the output checks
of both APIs, plain and streamed. This is the one list of them.

Every string value of the choice is a text, at any depth, in fields known and unknown alike
(an upstream may send any field: vLLM's and DeepSeek's `reasoning_content`, `reasoning`, whatever
comes next), except what is not text: the protocol's identifiers (a message's `role`, a tool
call's `id` and `type`), and the choice's `index`, `finish_reason` and `logprobs` (the tokens of
its texts: they go whenever a text is changed, held back or withheld, see `forget_tokens`).

Kinds: the chat `content` (the completions `text`) is the answer; a tool call's or the legacy
`function_call`'s `arguments` are JSON; a function's `name` and any string in a list entry without
an `index` are whole (on a stream: checked as they come, never held across chunks, since clients
do not join them); every other string is a text that a stream's deltas extend, as the SDKs join
them: by key, list entries by their `index`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Kind = Literal["answer", "text", "json", "whole"]
Path = tuple[str | int, ...]

NOT_TEXT = frozenset({"index", "finish_reason", "logprobs"})  # of the choice
IDENTIFIERS = frozenset({"id", "type"})  # of a tool call


@dataclass(frozen=True, slots=True)
class Text:
    path: Path  # from the choice; a list entry by its `index` field (else by its position)
    holder: dict[str, Any] | list[Any]
    key: str | int
    kind: Kind

    @property
    def value(self) -> str:
        value: str = self.holder[self.key]  # type: ignore[index]
        return value

    def set(self, text: str) -> None:
        self.holder[self.key] = text  # type: ignore[index]


def choice_texts(choice: dict[str, Any], body: str | None) -> list[Text]:
    """The texts of `choice`, in order. `body`: the chat choice's `message` or `delta`; None for a
    completions choice, whose own `text` is the answer."""
    found: list[Text] = []
    for key, value in choice.items():
        if key not in NOT_TEXT:
            _walk(value, (key,), choice, key, body, found, whole=False)
    return found


def _walk(
    value: Any,
    path: Path,
    holder: dict[str, Any] | list[Any],
    key: str | int,
    body: str | None,
    found: list[Text],
    *,
    whole: bool,
) -> None:
    if isinstance(value, str):
        kind = _kind(path, body)
        if kind is not None:
            found.append(Text(path, holder, key, "whole" if whole and kind == "text" else kind))
    elif isinstance(value, dict):
        for name, item in value.items():
            _walk(item, (*path, name), value, name, body, found, whole=whole)
    elif isinstance(value, list):
        for position, item in enumerate(value):
            index = item.get("index") if isinstance(item, dict) else None
            addressed = isinstance(index, int) and not isinstance(index, bool)
            step: int = index if isinstance(index, int) and addressed else position
            _walk(item, (*path, step), value, position, body, found, whole=whole or not addressed)


def _kind(path: Path, body: str | None) -> Kind | None:
    """What the string at `path` is; None: not text."""
    if body is None or path[0] != body:
        return "answer" if body is None and path == ("text",) else "text"
    inner = path[1:]
    if inner in (("content",), ("role",)):
        return "answer" if inner == ("content",) else None
    if inner[:1] == ("tool_calls",) and len(inner) in (3, 4):
        if len(inner) == 3:
            return None if inner[2] in IDENTIFIERS else "text"
        if inner[2:] == ("function", "arguments"):
            return "json"
        return "whole" if inner[3] == "name" else "text"  # a function's or a custom tool's name
    if inner[:1] == ("function_call",) and len(inner) == 2:
        return "json" if inner[1] == "arguments" else "whole" if inner[1] == "name" else "text"
    return "text"


def forget_tokens(choice: dict[str, Any], known: frozenset[str]) -> None:
    """What spells a choice's texts token by token no longer matches them (a text was redacted or
    held back): its `logprobs`, and the fields the gateway does not know that are not text (token ids)."""
    choice["logprobs"] = None
    for key in [key for key, value in choice.items() if key not in known and not _has_text(value)]:
        del choice[key]


def withhold_rest(choice: dict[str, Any], known: frozenset[str]) -> None:
    """A withheld choice keeps nothing the gateway does not know."""
    choice["logprobs"] = None
    for key in [key for key in choice if key not in known]:
        del choice[key]


def _has_text(value: Any) -> bool:
    if isinstance(value, str):
        return True
    if isinstance(value, dict):
        return any(_has_text(item) for item in value.values())
    if isinstance(value, list):
        return any(_has_text(item) for item in value)
    return False


def append_text(root: dict[str, Any], path: Path, text: str) -> None:
    """Add `text` to the string at `path` of `root` (a chunk's choice), creating what is missing
    (list entries by their `index`): the rest of a held-back text, sent with its choice's end."""
    holder: Any = root
    for at, step in enumerate(path[:-1]):
        if isinstance(step, int):
            holder = _entry(holder, step)
        else:
            want = list if isinstance(path[at + 1], int) else dict
            if not isinstance(holder.get(step), want):
                holder[step] = want()
            holder = holder[step]
    before = holder.get(path[-1])
    holder[path[-1]] = (before if isinstance(before, str) else "") + text


def _entry(entries: list[Any], index: int) -> dict[str, Any]:
    for entry in entries:
        if isinstance(entry, dict) and entry.get("index") == index:
            return entry
    entries.append({"index": index})
    return entries[-1]  # type: ignore[no-any-return]
