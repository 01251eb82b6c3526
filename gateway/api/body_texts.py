"""The texts of a client API's own body, each where it sits (a native pass-through's body: the
Messages API's, `gateway.api.messages.texts`; the Responses API's, `gateway.api.responses.texts`),
so that an input redaction made on the chat view can be written into the body a deployment is sent
as it came (`gateway.pipeline.native.redaction`)."""

from __future__ import annotations

from typing import Any


class BodyText:
    """One text: `holder[key]`, named by `path` as validation errors name fields."""

    __slots__ = ("fixed", "holder", "key", "path", "system", "viewed")

    def __init__(
        self, holder: Any, key: Any, path: str, *, fixed: bool = False, system: bool = False, viewed: bool = True
    ) -> None:
        self.holder = holder
        self.key = key
        self.path = path
        self.fixed = fixed  # an object key: never rewritten (a redaction of one refuses the request)
        self.system = system  # the application's own instructions (`system`, `instructions`)
        self.viewed = viewed  # the chat view carries it (False: only the body does, so only it is checked)

    @property
    def value(self) -> str:
        if self.fixed:
            return str(self.key)
        value: str = self.holder[self.key]
        return value

    def set(self, text: str) -> None:
        self.holder[self.key] = text


def string_at(
    holder: Any, name: str, at: str, found: list[BodyText], *, system: bool = False, viewed: bool = True
) -> None:
    """`holder[name]` when it is a string, named `at.name`."""
    if isinstance(holder, dict) and isinstance(holder.get(name), str):
        found.append(BodyText(holder, name, f"{at}.{name}", system=system, viewed=viewed))


def free_texts(value: Any, at: str, found: list[BodyText], *, viewed: bool = True) -> None:
    """Free-form JSON: every string, and every key (fixed) before the value it names."""
    if isinstance(value, dict):
        for name, item in value.items():
            found.append(BodyText(value, name, at, fixed=True, viewed=viewed))
            if isinstance(item, str):
                found.append(BodyText(value, name, f"{at}.{name}", viewed=viewed))
            else:
                free_texts(item, f"{at}.{name}", found, viewed=viewed)
    elif isinstance(value, list):
        for position, item in enumerate(value):
            if isinstance(item, str):
                found.append(BodyText(value, position, f"{at}[{position}]", viewed=viewed))
            else:
                free_texts(item, f"{at}[{position}]", found, viewed=viewed)
