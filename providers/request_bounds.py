"""The bounds on one request of a deployment that generates in the gateway's own process (`type:
local`, `type: mock`), so that no request multiplies the work of the process that serves everyone.

Two settings, the same on every such type: `max_sequences_per_request` bounds prompts * max(n,
best_of), and `max_tokens_per_request` bounds prompt tokens + max_tokens * those sequences. More
is a 400 naming the field that would have to shrink, before any work.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated

from pydantic import Field

from gateway.api.errors import InvalidRequest
from providers.base import Api
from providers.options import DroppableParams

# The chat names of the fields that the Completions checks name.
_CHAT_PARAMS = {"prompt": "messages", "max_tokens": "max_completion_tokens"}


class BoundedOptions(DroppableParams):
    """The `provider:` options of a type that generates in the gateway's process."""

    # Prompts x max(n, best_of) one request may ask for; more: 400 naming the field.
    max_sequences_per_request: Annotated[int, Field(ge=1)] = 64
    # Prompt tokens + max_tokens x sequences one request may ask for; more: 400 naming the field.
    max_tokens_per_request: Annotated[int, Field(ge=1)] = 262_144


@dataclass(frozen=True, slots=True)
class RequestLimits:
    """A deployment's bounds on one request (`max_sequences_per_request`, `max_tokens_per_request`)."""

    sequences: int
    tokens: int

    @classmethod
    def of(cls, options: BoundedOptions) -> RequestLimits:
        return cls(options.max_sequences_per_request, options.max_tokens_per_request)


def check_sequences(prompts: int, n: int, best_of: int | None, samples: int, limit: int) -> None:
    if prompts * samples <= limit:
        return
    if prompts > limit:
        param, what = "prompt", f"{prompts} prompts"
    elif best_of is not None and best_of > n:
        param, what = "best_of", f"{prompts} prompt(s) * best_of {best_of}"
    else:
        param, what = "n", f"{prompts} prompt(s) * n {n}"
    raise InvalidRequest(
        f"This request asks for {prompts * samples} sequences ({what}); this deployment generates at most "
        f"{limit} per request (prompts * max(n, best_of)). Split the request, or lower '{param}'.",
        param=param,
        code="request_too_large",
    )


def check_tokens(prompt_tokens: int, completion_tokens: int, limit: int, *, exact: bool) -> None:
    if prompt_tokens + completion_tokens <= limit:
        return
    param = "prompt" if prompt_tokens > limit else "max_tokens"
    prompts = f"{prompt_tokens} prompt tokens" if exact else f"at least {prompt_tokens} prompt tokens"
    raise InvalidRequest(
        f"This request asks for more than {limit} tokens ({prompts}; max_tokens * sequences: {completion_tokens}), "
        "the most this deployment serves in one request. Split the request, or lower "
        f"'{param}'.",
        param=param,
        code="request_too_large",
    )


@contextmanager
def chat_names(api: Api = "chat") -> Iterator[None]:
    """A 400 raised by the checks chat shares with completions names the chat field."""
    try:
        yield
    except InvalidRequest as exc:
        if api == "chat" and exc.param in _CHAT_PARAMS:
            exc.param = _CHAT_PARAMS[exc.param]
        raise
