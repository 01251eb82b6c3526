"""A Completions body as the engine's work: token-id prompts, samples per prompt, sampling settings.

Everything the engine cannot honour is refused here with a 400 naming the field, before any work
is queued: `suffix` on a model without fill-in-the-middle tokens, a prompt plus `max_tokens` past
the context, token ids or `logit_bias` keys outside the vocabulary, fields that are not
Completions parameters, and a request larger than the deployment's bounds (prompts * max(n,
best_of) sequences; prompt tokens + max_tokens * sequences).

Two phases, so that the event loop never tokenises a large request: `check_request` runs on the
loop and does only what is cheap (the fields, the prompt count, each text prompt's byte length
against the context: no token covers more bytes than the vocabulary's longest token, so a text
of more bytes than that many contexts cannot fit), then `tokenise` (off the loop when the prompts
are large) makes the token ids and the exact checks.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from gateway.api.errors import InvalidRequest
from providers.base import Api
from providers.completion_params import (
    COMPLETION_FIELDS,
    Rule,
    check_params,
    choices_per_prompt,
    include_usage,
    stop_sequences,
    supported,
)
from providers.local.chat_tokens import chat_ids
from providers.local.loader import LoadedModel
from providers.request_bounds import RequestLimits, check_sequences, check_tokens

ENGINE = "the local engine"
DEFAULT_MAX_TOKENS = 16


@dataclass(frozen=True, slots=True)
class SamplingParams:
    max_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    logit_bias: tuple[tuple[int, float], ...] = ()
    logprobs: int | None = None  # None: no logprobs; 0…5: the sampled token and that many alternatives
    echo: bool = False
    stop: tuple[str, ...] = ()
    seed: int | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0 or self.top_p == 0.0

    @property
    def penalised(self) -> bool:
        return self.presence_penalty != 0.0 or self.frequency_penalty != 0.0


@dataclass(frozen=True, slots=True)
class Conversation:
    """A chat request's messages (content as text), rendered by the model's chat template when
    the request is tokenised."""

    messages: tuple[dict[str, Any], ...]

    def __len__(self) -> int:
        return sum(len(message["content"]) for message in self.messages)

    @property
    def text(self) -> str:
        return "".join(message["content"] for message in self.messages)

    def tokens(self, model: LoadedModel) -> list[int]:
        """The templated conversation as token ids; a message's spelling of a special token is text."""
        return chat_ids(model.tokenizer, list(self.messages), model.special_tokens)


@dataclass(frozen=True, slots=True)
class Draft:
    """A request checked on the event loop, its prompts not yet tokenised."""

    items: tuple[str | tuple[int, ...] | Conversation, ...]  # each prompt: a text, token ids as given, or a chat
    suffix: str | None
    samples: int
    n: int
    params: SamplingParams
    model: str
    stream: bool
    include_usage: bool
    open_ended: bool = False  # no max tokens given (chat): as many as the context and bounds leave
    api: Api = "completions"

    @property
    def work(self) -> int:
        """Characters and token ids to go through: what decides whether tokenising leaves the loop."""
        return sum(len(item) for item in self.items) + len(self.suffix or "")


@dataclass(frozen=True, slots=True)
class JobPlan:
    prompts: tuple[tuple[int, ...], ...]  # what the model reads, per prompt
    samples: int  # sequences generated per prompt: best_of (≥ n)
    n: int  # choices returned per prompt: the best `n` of `samples`
    params: SamplingParams
    model: str  # the answer's `model`
    stream: bool = False
    include_usage: bool = False
    api: Api = "completions"  # the client API the answer is shaped for

    @property
    def sequences(self) -> int:
        return len(self.prompts) * self.samples


def plan_request(
    body: dict[str, Any], model: LoadedModel, *, deployment: str, drop: list[str], limits: RequestLimits
) -> JobPlan:
    """Both phases at once (for callers that may tokenise where they are)."""
    return tokenise(check_request(body, model, deployment=deployment, drop=drop, limits=limits), model, limits)


def check_request(
    body: dict[str, Any], model: LoadedModel, *, deployment: str, drop: list[str], limits: RequestLimits
) -> Draft:
    """What can be refused without tokenising; cheap whatever the body holds."""
    rules: dict[str, Rule] = dict.fromkeys(COMPLETION_FIELDS, supported)
    rules["suffix"] = _suffix_rule(model)
    body = check_params(body, rules, drop=drop, deployment=deployment, api=ENGINE)
    params = _sampling(body, model.vocab_size)
    n = choices_per_prompt(body)
    best_of = body.get("best_of")
    samples = max(n, best_of or 1)
    items = _items(body, model)
    check_sequences(len(items), n, best_of, samples, limits.sequences)
    suffix = body.get("suffix") if model.fim is not None else None
    suffix_least = _least_tokens(suffix, model) if suffix else 0
    least = []  # fewest tokens each prompt can become
    for item in items:
        fewest = (_least_tokens(item, model) + suffix_least) if isinstance(item, str) else len(item)
        if fewest + params.max_tokens > model.context_length:
            if isinstance(item, str):
                raise _too_long_text(model, len(item.encode("utf-8", "surrogatepass")), fewest)
            _check_context(model, len(item), params.max_tokens)
        least.append(fewest)
    check_tokens(sum(least), params.max_tokens * len(items) * samples, limits.tokens, exact=False)
    return Draft(
        items=tuple(item if isinstance(item, str) else tuple(item) for item in items),
        suffix=suffix or None,
        samples=samples,
        n=n,
        params=params,
        model=str(body.get("model")),
        stream=bool(body.get("stream")),
        include_usage=include_usage(body),
    )


def tokenise(draft: Draft, model: LoadedModel, limits: RequestLimits) -> JobPlan:
    """The prompts' token ids and the exact checks (the context, the tokens bound)."""
    suffix_ids = list(model.tokenizer.encode(draft.suffix, add_special_tokens=False)) if draft.suffix else None
    prompts = [_tokens(item, model, suffix_ids) for item in draft.items]
    params = draft.params
    sequences = len(prompts) * draft.samples
    prompt_tokens = sum(len(prompt) for prompt in prompts)
    if draft.open_ended:
        room = min(model.context_length - max(map(len, prompts)), (limits.tokens - prompt_tokens) // sequences)
        params = replace(params, max_tokens=max(room, 1))
    for prompt in prompts:
        _check_context(model, len(prompt), params.max_tokens)
    check_tokens(prompt_tokens, params.max_tokens * sequences, limits.tokens, exact=True)
    return JobPlan(
        prompts=tuple(prompts),
        samples=draft.samples,
        n=draft.n,
        params=params,
        model=draft.model,
        stream=draft.stream,
        include_usage=draft.include_usage,
        api=draft.api,
    )


def _check_context(model: LoadedModel, prompt_tokens: int, max_tokens: int) -> None:
    limit = model.context_length
    if prompt_tokens + max_tokens > limit:
        raise InvalidRequest(
            f"This model's maximum context length is {limit} tokens, however you requested "
            f"{prompt_tokens + max_tokens} tokens ({prompt_tokens} in your prompt; {max_tokens} "
            "for the completion). Please reduce your prompt; or completion length.",
            param="max_tokens",
            code="context_length_exceeded",
        )


def _least_tokens(text: str, model: LoadedModel) -> int:
    """The fewest tokens a text can become: no token covers more bytes than the longest one."""
    size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
    return -(-size // model.max_token_bytes)


def _too_long_text(model: LoadedModel, size: int, fewest: int) -> InvalidRequest:
    return InvalidRequest(
        f"This model's maximum context length is {model.context_length} tokens, however your prompt of {size} bytes "
        f"is at least {fewest} tokens (a token of this model covers at most {model.max_token_bytes} bytes). "
        "Please reduce your prompt.",
        param="prompt",
        code="context_length_exceeded",
    )


def _suffix_rule(model: LoadedModel) -> Rule:
    def rule(value: Any, body: dict[str, Any]) -> str | None:
        if not value:
            return None
        if model.fim is None:
            return "this model has no fill-in-the-middle tokens"
        if body.get("echo"):
            return "it cannot be combined with 'echo' (the model reads the suffix before the completion)"
        return None

    return rule


def _sampling(body: dict[str, Any], vocab_size: int) -> SamplingParams:
    max_tokens = body.get("max_tokens")
    return SamplingParams(
        max_tokens=DEFAULT_MAX_TOKENS if max_tokens is None else int(max_tokens),
        temperature=_number(body, "temperature", 1.0),
        top_p=_number(body, "top_p", 1.0),
        presence_penalty=_number(body, "presence_penalty", 0.0),
        frequency_penalty=_number(body, "frequency_penalty", 0.0),
        logit_bias=_logit_bias(body.get("logit_bias"), vocab_size),
        logprobs=body.get("logprobs"),
        echo=bool(body.get("echo")),
        stop=tuple(stop_sequences(body)),
        seed=body.get("seed"),
    )


def _number(body: dict[str, Any], name: str, default: float) -> float:
    value = body.get(name)
    return default if value is None else float(value)


def _logit_bias(given: dict[str, float] | None, vocab_size: int) -> tuple[tuple[int, float], ...]:
    bias = tuple((int(token), float(value)) for token, value in (given or {}).items())
    for token, _ in bias:
        if token >= vocab_size:
            raise InvalidRequest(
                f"Invalid key in 'logit_bias': {token}. Maximum value is {vocab_size - 1}.",
                param="logit_bias",
                code="invalid_value",
            )
    return bias


def _items(body: dict[str, Any], model: LoadedModel) -> list[str | list[int]]:
    prompt = body.get("prompt")
    if prompt is None:  # OpenAI: as if from the beginning of a new document
        return [[model.eos_token_id]]
    if isinstance(prompt, str) or (prompt and isinstance(prompt[0], int)):
        return [prompt]
    return list(prompt)


def _tokens(
    item: str | tuple[int, ...] | Conversation, model: LoadedModel, suffix_ids: list[int] | None
) -> tuple[int, ...]:
    if isinstance(item, Conversation):
        return tuple(item.tokens(model)) or (model.eos_token_id,)
    fim = model.fim if suffix_ids is not None else None
    lead: list[int] = []  # what goes before a fill-in-the-middle prompt: the BOS a tokenizer adds
    if isinstance(item, str):
        ids = list(model.tokenizer.encode(item))
        if fim is not None:
            bare = list(model.tokenizer.encode(item, add_special_tokens=False))
            lead = ids[:1] if ids[:1] == [model.tokenizer.bos_token_id] and bare[:1] != ids[:1] else []
            ids = bare
    else:
        ids = list(item)
        outside = [token for token in ids if token >= model.vocab_size]
        if outside:
            raise InvalidRequest(
                f"Invalid token id in 'prompt': {outside[0]}. Maximum value is {model.vocab_size - 1}.",
                param="prompt",
                code="invalid_value",
            )
    if fim is not None and suffix_ids is not None:  # prefix-suffix-middle order: the completion is the middle
        ids = [*lead, fim.prefix, *ids, fim.suffix, *suffix_ids, fim.middle]
    return tuple(ids) or (model.eos_token_id,)  # an empty prompt reads as a new document too
