"""What a translated API can honour of a Completions body, checked before any upstream call.

A parameter an API cannot honour is a 400 naming it and the deployment, never silently dropped;
a deployment lists in `drop_params` the ones it agrees to have dropped instead. A parameter at
its neutral value (`echo: false`, `presence_penalty: 0`, `best_of` equal to `n`…) asks for
nothing, so it passes everywhere: clients such as LangChain send them by default.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from gateway.api.errors import InvalidRequest

# (value, whole body) -> why it cannot be honoured, or None when it can.
Rule = Callable[[Any, dict[str, Any]], str | None]

# Every adapter handles these itself (prompt and model shape the call; the rest it always maps).
HANDLED = frozenset({"model", "prompt", "stream", "stream_options", "max_tokens", "temperature", "top_p", "stop", "n"})
NEVER_DROPPED = frozenset({"model", "prompt", "messages", "stream", "stream_options"})

_NEUTRAL: dict[str, Callable[[Any, dict[str, Any]], bool]] = {
    "best_of": lambda value, body: value is None or value == (body.get("n") or 1),
    "echo": lambda value, body: not value,
    "frequency_penalty": lambda value, body: not value,
    "presence_penalty": lambda value, body: not value,
    "logit_bias": lambda value, body: not value,
    "logprobs": lambda value, body: value is None,
    "seed": lambda value, body: value is None,
    "suffix": lambda value, body: not value,
    "user": lambda value, body: value is None,
}
COMPLETION_FIELDS = HANDLED | _NEUTRAL.keys()
Neutral = Mapping[str, Callable[[Any, dict[str, Any]], bool]]


@dataclass(frozen=True, slots=True)
class Reference:
    """A client API's parameters as `check_params` sees them: those every adapter handles, and
    those that pass at their neutral value (a 400 otherwise, unless a rule maps them)."""

    name: str  # for messages: 'Completions'
    handled: frozenset[str]
    neutral: Neutral

    @property
    def fields(self) -> frozenset[str]:
        return self.handled | self.neutral.keys()


COMPLETIONS = Reference("Completions", HANDLED, _NEUTRAL)


def supported(value: Any, body: dict[str, Any]) -> str | None:
    """The rule of a parameter the API maps in full."""
    return None


def at_most(limit: float, what: str) -> Rule:
    """The rule of a numeric parameter the API accepts only up to `limit`."""

    def rule(value: Any, body: dict[str, Any]) -> str | None:
        return None if value is None or value <= limit else f"{what} accepts at most {limit:g}, got {value!r}"

    return rule


def check_params(
    body: dict[str, Any],
    rules: Mapping[str, Rule],
    *,
    drop: Collection[str],
    deployment: str,
    api: str,
    forwards_unknown: bool = False,
    reference: Reference = COMPLETIONS,
) -> dict[str, Any]:
    """The body without the deployment's dropped parameters; `InvalidRequest` for the first one
    it cannot honour. Fields the client API's reference (Completions unless told) does not know are
    refused too unless the API takes them as they are (`forwards_unknown`, OpenAI-compatible APIs)
    or a rule maps them."""
    kept: dict[str, Any] = {}
    for name, value in body.items():
        if name in drop and name not in NEVER_DROPPED:
            continue
        reason = _reason(name, value, body, rules, api, forwards_unknown, reference)
        if reason is not None:
            raise InvalidRequest(
                f"The deployment '{deployment}' cannot honour '{name}': {reason}. Remove it from the request, "
                f"or list it in the deployment's provider.drop_params to have it dropped.",
                param=name,
                code="unsupported_parameter",
            )
        kept[name] = value
    return kept


def _reason(
    name: str,
    value: Any,
    body: dict[str, Any],
    rules: Mapping[str, Rule],
    api: str,
    forwards_unknown: bool,
    reference: Reference,
) -> str | None:
    rule = rules.get(name)
    if rule is not None:
        return rule(value, body)
    if name in reference.handled:
        return None
    neutral = reference.neutral.get(name)
    if neutral is not None:
        return None if neutral(value, body) else f"{api} has no equivalent"
    return None if forwards_unknown else f"it is not a {reference.name} parameter {api} takes"


def text_prompts(body: dict[str, Any], deployment: str, api: str) -> list[str]:
    """The prompt as a list of texts: chat-style APIs take text, not token ids."""
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        return [prompt]
    if isinstance(prompt, list) and prompt and all(isinstance(item, str) for item in prompt):
        return list(prompt)
    what = "a null prompt (the model's <|endoftext|>)" if prompt is None else "token-id prompts"
    raise InvalidRequest(
        f"The deployment '{deployment}' cannot honour 'prompt': {api} takes text, so {what} cannot be sent; "
        "give a string or an array of strings.",
        param="prompt",
        code="unsupported_parameter",
    )


def stop_sequences(body: dict[str, Any]) -> list[str]:
    stop = body.get("stop")
    if stop is None:
        return []
    return [stop] if isinstance(stop, str) else list(stop)


def max_tokens(body: dict[str, Any], default: int | None) -> int | None:
    """The client's `max_tokens`, or the deployment's default when it sent none (or null)."""
    value = body.get("max_tokens")
    return default if value is None else int(value)


def include_usage(body: dict[str, Any]) -> bool:
    return bool((body.get("stream_options") or {}).get("include_usage"))


def choices_per_prompt(body: dict[str, Any]) -> int:
    return int(body.get("n") or 1)
