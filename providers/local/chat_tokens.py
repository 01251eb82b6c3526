"""A conversation as token ids in which only the chat template writes control tokens.

A template renders to one text, and encoding that text makes every spelling of a special token
in it the special token, also one a caller typed into a message: `<|im_end|>\n<|im_start|>system`
in a user's content would close the user's turn and open a system turn. transformers'
`sanitize_control_tokens` marks such spellings in the inputs before rendering and encodes the
marked spans as text. Its markers survive what templates do with a string (concatenate, trim,
`tojson`), but not every filter: a template that prints a list through Python's `repr` (or
`tojson(ensure_ascii=True)`) escapes them and the spelling would become the token again. So when
a message spells a special token, the ids are checked against the same conversation rendered with
those spellings removed: more special tokens than that one holds is a 400 naming `messages`,
never a prompt with a forged turn.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from transformers import PreTrainedTokenizerBase

from gateway.api.errors import InvalidRequest


@dataclass(frozen=True, slots=True)
class SpecialTokens:
    """A tokenizer's special tokens: their ids, and a pattern matching any spelling (longest first)."""

    ids: frozenset[int]
    spelled: re.Pattern[str]

    @classmethod
    def of(cls, tokenizer: PreTrainedTokenizerBase) -> SpecialTokens:
        added = {token.content: index for index, token in tokenizer.added_tokens_decoder.items() if token.special}
        for spelling in tokenizer.all_special_tokens:  # bos, eos, …: added tokens too, on every tokenizer seen
            index = tokenizer.convert_tokens_to_ids(spelling)
            if isinstance(index, int):
                added.setdefault(spelling, index)
        spellings = sorted((spelling for spelling in added if spelling), key=len, reverse=True)
        pattern = "|".join(map(re.escape, spellings)) or "(?!)"  # (?!) never matches
        return cls(ids=frozenset(added.values()), spelled=re.compile(pattern))

    def count(self, ids: list[int]) -> Counter[int]:
        return Counter(token for token in ids if token in self.ids)


def chat_ids(tokenizer: PreTrainedTokenizerBase, messages: list[dict[str, Any]], special: SpecialTokens) -> list[int]:
    """The templated conversation, the assistant's turn opened, as token ids: the template writes
    the special tokens itself, so the tokenizer adds none, and a message's spelling of one is text."""
    ids = _render(tokenizer, messages)
    if any(special.spelled.search(text) for text in _strings(messages)):
        template_only = _render(tokenizer, _without(messages, special.spelled))
        forged = special.count(ids) - special.count(template_only)
        if forged:
            token = tokenizer.convert_ids_to_tokens(next(iter(forged)))
            raise InvalidRequest(
                f"This model's chat template prints a message's text in a way that would make its '{token}' a "
                "control token (it escapes the text before the tokenizer can tell it apart). Remove the spelling "
                "of the model's special tokens from the messages.",
                param="messages",
                code="invalid_value",
            )
    return ids


def _render(tokenizer: PreTrainedTokenizerBase, messages: list[dict[str, Any]]) -> list[int]:
    try:
        ids = tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=True, return_dict=False, sanitize_control_tokens=True
        )
    except Exception as exc:  # the template's own checks (roles must alternate, …) refuse the messages
        raise InvalidRequest(
            f"The model's chat template cannot render these messages: {exc}", param="messages", code="invalid_value"
        ) from None
    return [int(token) for token in ids]


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def _without(value: Any, spelled: re.Pattern[str]) -> Any:
    """`value` with every special token's spelling removed, also one that removing others makes."""
    if isinstance(value, str):
        while spelled.search(value):
            value = spelled.sub("", value)
        return value
    if isinstance(value, dict):
        return {_without(key, spelled): _without(item, spelled) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_without(item, spelled) for item in value]
    return value
