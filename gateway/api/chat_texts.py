"""Every text of a chat request that the upstream receives, with its path, and its images,
audio and files: one walk over the (validated) body that the input guardrails and the limits'
estimate share, so that what one of them reads the other counts.

Read, in the body's order: each message's content (string, text and refusal parts), `refusal`,
`name`, `tool_call_id`, tool calls (id, name, arguments, custom input), the legacy `function_call`;
each tool's name, description, parameter schema and custom format; `tool_choice`'s names;
`response_format`'s schema name, description and schema; the legacy `functions` and
`function_call`; `stop`, `user` and `metadata` (not prompt, but the provider receives and keeps
them); and every field the Chat Completions reference does not know, at every level (in
the body, in a message, a part, a tool…): its name and every string and object key inside it.
Schemas and unknown values are free-form JSON: every string in them is read, keys included.

Not read (no text): `model` (a deployment name or alias of the config), enum fields (`role`,
`type`, `detail`, audio `format`, `tool_choice` modes, `reasoning_effort`, `service_tier`), numbers
and booleans, `logit_bias` (token ids), and media: an image's `data:` URL, audio `data`, a file's
`file_data` (base64 bytes, not text; reported as `Media` for the estimate). An image given by an
http(s) URL is both: its URL is read as text, and the image is a `Media`.

A text is `fixed` when it cannot be rewritten in place: an object key, or an identifier other
fields refer to (tool and function names, tool-call ids, `tool_call_id`, a schema's `name`, a
`file_id`, `allowed_tools`' references). A guardrail that would redact one refuses the request
instead (see `gateway.pipeline.chat_guarding`).

Paths are named as validation errors name fields (`tools[0].function.parameters.properties.city.
description`); a key is named by the path of the object that holds it (`body` for the body's own),
so that a path never shows a key before the key has been read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

MediaKind = Literal["image", "audio", "file"]


class Text:
    """One text: `text`, at `path`; `holder[key]` is where it sits (a dict or a list), so that a
    guardrail can rewrite it in place."""

    __slots__ = ("content", "fixed", "holder", "key", "message", "path", "text")

    def __init__(self, text: str, path: str, holder: Any, key: Any, message: int, fixed: bool, content: bool) -> None:
        self.text = text
        self.path = path
        self.holder = holder
        self.key = key
        self.message = message  # the index of the message it belongs to; -1 outside `messages`
        self.fixed = fixed  # an object key or an identifier: never rewritten
        self.content = content  # a message's content (a string content, a text or refusal part)


@dataclass(frozen=True, slots=True)
class Media:
    kind: MediaKind
    data_chars: int  # characters of its inline base64 data; 0 when given by reference (URL, file_id)
    detail: str | None = None  # an image's `detail`, audio's `format`


class ChatTexts:
    __slots__ = ("chars", "media", "texts")

    def __init__(self) -> None:
        self.texts: list[Text] = []  # empty when only counted
        self.media: list[Media] = []
        self.chars = 0  # the characters of all texts


# Top-level fields of the reference that carry no text the model reads (see the module's docstring).
UNREAD_FIELDS = frozenset(
    {
        "model",
        "frequency_penalty",
        "logit_bias",
        "logprobs",
        "top_logprobs",
        "max_completion_tokens",
        "max_tokens",
        "n",
        "presence_penalty",
        "seed",
        "stream",
        "stream_options",
        "temperature",
        "top_p",
        "parallel_tool_calls",
        "reasoning_effort",
        "store",
        "service_tier",
    }
)
INSTRUCTION_ROLES = frozenset({"system", "developer"})  # the application's own instructions, when they lead


def chat_texts(body: Mapping[str, Any], *, count_only: bool = False) -> ChatTexts:
    """The texts and media of a chat body, in the body's order (a key before what it holds).
    `count_only`: their characters (`chars`) and media only, no `Text` and no path built."""
    walk = _Walk(not count_only)
    for name, value in body.items():
        if name in UNREAD_FIELDS:
            continue
        reader = _BODY.get(name)
        if reader is None:
            walk.add(name, "body", body, name, fixed=True)
            walk.free(value, name, body, name)
        elif value is not None:
            reader(walk, value, name, body, name)
    return walk.found


def leading_instructions(messages: Any) -> int:
    """How many messages lead the conversation as instructions (system/developer) before its first
    user, assistant, tool or function message: the application's own system prompt."""
    count = 0
    for message in messages if isinstance(messages, list) else ():
        if not isinstance(message, dict) or message.get("role") not in INSTRUCTION_ROLES:
            break
        count += 1
    return count


# A reader: (walk, value, its path, the object holding it, its key there).
Reader = Callable[["_Walk", Any, str, Any, Any], None]


class _Walk:
    __slots__ = ("found", "message", "paths")

    def __init__(self, paths: bool) -> None:
        self.found = ChatTexts()
        self.message = -1
        self.paths = paths  # False: only count (the estimate), no path built

    def add(self, text: str, path: str, holder: Any, key: Any, *, fixed: bool = False, content: bool = False) -> None:
        self.found.chars += len(text)
        if self.paths:
            self.found.texts.append(Text(text, path, holder, key, self.message, fixed, content))

    def free(self, value: Any, path: str, holder: Any, key: Any, *, fixed: bool = False) -> None:
        """Free-form JSON: every string, every key (fixed) before the value it names."""
        if not self.paths:
            self.found.chars += json_chars(value)
        elif isinstance(value, str):
            self.add(value, path, holder, key, fixed=fixed)
        elif isinstance(value, dict):
            for name, item in value.items():
                self.add(name, path, value, name, fixed=True)
                self.free(item, f"{path}.{name}" if self.paths else path, value, name, fixed=fixed)
        elif isinstance(value, list):
            for position, item in enumerate(value):
                self.free(item, f"{path}[{position}]" if self.paths else path, value, position, fixed=fixed)

    def known(self, value: Any, path: str, holder: Any, key: Any, readers: Mapping[str, Reader | None]) -> None:
        """An object of the reference: its known fields by their readers (None: not read), the
        others (unknown to the reference, forwarded) as free-form. Not an object: free-form."""
        if not isinstance(value, dict):
            self.free(value, path, holder, key)
            return
        for name, item in value.items():
            if name in readers:
                reader = readers[name]
                if reader is not None and item is not None:
                    reader(self, item, f"{path}.{name}" if self.paths else path, value, name)
            else:  # (its name is sent even when its value is null)
                self.add(name, path, value, name, fixed=True)
                self.free(item, f"{path}.{name}" if self.paths else path, value, name)

    def at(self, path: str, position: int) -> str:
        return f"{path}[{position}]" if self.paths else path


def json_chars(value: Any) -> int:
    """The characters of every string and key of free-form JSON (the counting walk's fast path)."""
    if isinstance(value, str):
        return len(value)
    count = 0
    if isinstance(value, dict):
        for name, item in value.items():
            count += len(name) + (len(item) if isinstance(item, str) else json_chars(item))
    elif isinstance(value, list):
        for item in value:
            count += len(item) if isinstance(item, str) else json_chars(item)
    return count


def _text(walk: _Walk, value: Any, path: str, holder: Any, key: Any) -> None:
    walk.free(value, path, holder, key)  # a string as a rule; anything else read whole


def _ident(walk: _Walk, value: Any, path: str, holder: Any, key: Any) -> None:
    walk.free(value, path, holder, key, fixed=True)


def _content_text(walk: _Walk, value: Any, path: str, holder: Any, key: Any) -> None:
    if isinstance(value, str):
        walk.add(value, path, holder, key, content=True)
    else:
        walk.free(value, path, holder, key)


def _each(readers: Mapping[str, Reader | None]) -> Reader:
    """A list of objects read by `readers` (anything else: free-form)."""

    def read(walk: _Walk, value: Any, path: str, holder: Any, key: Any) -> None:
        if not isinstance(value, list):
            walk.free(value, path, holder, key)
            return
        for position, item in enumerate(value):
            walk.known(item, walk.at(path, position), value, position, readers)

    return read


def _object(readers: Mapping[str, Reader | None]) -> Reader:
    return lambda walk, value, path, holder, key: walk.known(value, path, holder, key, readers)


def _image_url(walk: _Walk, value: Any, path: str, holder: Any, key: Any) -> None:
    walk.known(value, path, holder, key, _IMAGE_URL)
    url = value.get("url") if isinstance(value, dict) else None
    if isinstance(url, str):
        detail = value.get("detail")
        inline = len(url) if url.startswith("data:") else 0
        walk.found.media.append(Media("image", inline, detail if isinstance(detail, str) else None))


def _image_address(walk: _Walk, value: Any, path: str, holder: Any, key: Any) -> None:
    if not (isinstance(value, str) and value.startswith("data:")):  # an image's bytes are no text
        walk.free(value, path, holder, key)


def _audio(walk: _Walk, value: Any, path: str, holder: Any, key: Any) -> None:
    walk.known(value, path, holder, key, _AUDIO)
    data = value.get("data") if isinstance(value, dict) else None
    if isinstance(data, str):
        kind = value.get("format")
        walk.found.media.append(Media("audio", len(data), kind if isinstance(kind, str) else None))


def _file(walk: _Walk, value: Any, path: str, holder: Any, key: Any) -> None:
    walk.known(value, path, holder, key, _FILE)
    if isinstance(value, dict):
        data = value.get("file_data")
        if isinstance(data, str):
            walk.found.media.append(Media("file", len(data)))
        elif value.get("file_id") is not None:
            walk.found.media.append(Media("file", 0))


def _content(walk: _Walk, value: Any, path: str, holder: Any, key: Any) -> None:
    if not isinstance(value, list):
        _content_text(walk, value, path, holder, key)
        return
    for position, part in enumerate(value):
        walk.known(part, walk.at(path, position), value, position, _PART)


def _messages(walk: _Walk, value: Any, path: str, holder: Any, key: Any) -> None:
    if not isinstance(value, list):
        walk.free(value, path, holder, key)
        return
    for position, message in enumerate(value):
        if not walk.paths and isinstance(message, dict) and len(message) == 2 and "role" in message:
            content = message.get("content")
            if isinstance(content, str):  # counting the usual {role, content} message, without the dispatch
                walk.found.chars += len(content)
                continue
        walk.message = position
        readers = _FUNCTION_MESSAGE if isinstance(message, dict) and message.get("role") == "function" else _MESSAGE
        walk.known(message, walk.at(path, position), value, position, readers)
    walk.message = -1


_IMAGE_URL: dict[str, Reader | None] = {"url": _image_address, "detail": None}
_AUDIO: dict[str, Reader | None] = {"data": None, "format": None}
_FILE: dict[str, Reader | None] = {"file_data": None, "file_id": _ident, "filename": _text}
_PART: dict[str, Reader | None] = {
    "type": None,
    "text": _content_text,
    "refusal": _content_text,
    "image_url": _image_url,
    "input_audio": _audio,
    "file": _file,
}
_FUNCTION_CALL: dict[str, Reader | None] = {"name": _ident, "arguments": _text}
_TOOL_CALL: dict[str, Reader | None] = {
    "id": _ident,
    "type": None,
    "function": _object(_FUNCTION_CALL),
    "custom": _object({"name": _ident, "input": _text}),
}
_MESSAGE: dict[str, Reader | None] = {
    "role": None,
    "content": _content,
    "refusal": _content_text,
    "name": _text,
    "tool_call_id": _ident,
    "tool_calls": _each(_TOOL_CALL),
    "function_call": _object(_FUNCTION_CALL),
}
_FUNCTION_MESSAGE = {**_MESSAGE, "name": _ident}  # the deprecated function message: `name` names the function
_FUNCTION: dict[str, Reader | None] = {"name": _ident, "description": _text, "parameters": _text, "strict": None}
_LEGACY_FUNCTION: dict[str, Reader | None] = {"name": _ident, "description": _text, "parameters": _text}
_NAMED: dict[str, Reader | None] = {"name": _ident}
_TOOL: dict[str, Reader | None] = {
    "type": None,
    "function": _object(_FUNCTION),
    "custom": _object({"name": _ident, "description": _text, "format": _text}),
}
_TOOL_CHOICE: dict[str, Reader | None] = {
    "type": None,
    "function": _object(_NAMED),
    "custom": _object(_NAMED),
    "allowed_tools": _object({"mode": None, "tools": _ident}),
}
_RESPONSE_FORMAT: dict[str, Reader | None] = {
    "type": None,
    "json_schema": _object({"name": _ident, "description": _text, "schema": _text, "strict": None}),
}


def _tool_choice(walk: _Walk, value: Any, path: str, holder: Any, key: Any) -> None:
    if not isinstance(value, str):  # a string is a mode (none, auto, required): validated, no text
        walk.known(value, path, holder, key, _TOOL_CHOICE)


def _legacy_function_call(walk: _Walk, value: Any, path: str, holder: Any, key: Any) -> None:
    """The deprecated `function_call`, not validated: "none", "auto" or `{name}`."""
    if isinstance(value, str):
        _ident(walk, value, path, holder, key)
    else:
        walk.known(value, path, holder, key, _NAMED)


_BODY: dict[str, Reader] = {
    "messages": _messages,
    "tools": _each(_TOOL),
    "tool_choice": _tool_choice,
    "response_format": _object(_RESPONSE_FORMAT),
    "functions": _each(_LEGACY_FUNCTION),  # deprecated, not validated: read like tools' functions
    "function_call": _legacy_function_call,
    "stop": _text,  # not prompt, but the upstream receives it
    "user": _text,  # the end user's id: the provider keeps it, so a PII policy must see it
    "metadata": _text,  # free-form strings the provider stores with the completion
}
