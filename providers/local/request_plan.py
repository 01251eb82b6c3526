"""A Completions body as the engine's work: token-id prompts, samples per prompt, sampling settings.

Everything the engine cannot honour is refused here with a 400 naming the field, before any work
is queued: `suffix` on a model without fill-in-the-middle tokens, a prompt plus `max_tokens` past
the context, token ids or `logit_bias` keys outside the vocabulary, fields that are not
Completions parameters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gateway.errors import InvalidRequest
from providers.completion_params import (
    COMPLETION_FIELDS,
    Rule,
    check_params,
    choices_per_prompt,
    include_usage,
    stop_sequences,
    supported,
)
from providers.local.loader import LoadedModel

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
class JobPlan:
    prompts: tuple[tuple[int, ...], ...]  # what the model reads, per prompt
    samples: int  # sequences generated per prompt: best_of (≥ n)
    n: int  # choices returned per prompt: the best `n` of `samples`
    params: SamplingParams
    model: str  # the answer's `model`
    stream: bool = False
    include_usage: bool = False

    @property
    def sequences(self) -> int:
        return len(self.prompts) * self.samples


def plan_request(body: dict[str, Any], model: LoadedModel, *, deployment: str, drop: list[str]) -> JobPlan:
    rules: dict[str, Rule] = dict.fromkeys(COMPLETION_FIELDS, supported)
    rules["suffix"] = _suffix_rule(model)
    body = check_params(body, rules, drop=drop, deployment=deployment, api=ENGINE)
    params = _sampling(body, model.vocab_size)
    prompts = _prompts(body, model)
    limit = model.context_length
    for prompt in prompts:
        if len(prompt) + params.max_tokens > limit:
            raise InvalidRequest(
                f"This model's maximum context length is {limit} tokens, however you requested "
                f"{len(prompt) + params.max_tokens} tokens ({len(prompt)} in your prompt; {params.max_tokens} "
                "for the completion). Please reduce your prompt; or completion length.",
                param="max_tokens",
                code="context_length_exceeded",
            )
    n = choices_per_prompt(body)
    best_of = body.get("best_of")
    return JobPlan(
        prompts=tuple(prompts),
        samples=max(n, best_of or 1),
        n=n,
        params=params,
        model=str(body.get("model")),
        stream=bool(body.get("stream")),
        include_usage=include_usage(body),
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


def _prompts(body: dict[str, Any], model: LoadedModel) -> list[tuple[int, ...]]:
    prompt = body.get("prompt")
    if prompt is None:  # OpenAI: as if from the beginning of a new document
        texts: list[str | list[int]] = [[model.eos_token_id]]
    elif isinstance(prompt, str) or (prompt and isinstance(prompt[0], int)):
        texts = [prompt]
    else:
        texts = list(prompt)
    suffix = body.get("suffix")
    return [_tokens(item, model, suffix) for item in texts]


def _tokens(item: str | list[int], model: LoadedModel, suffix: str | None) -> tuple[int, ...]:
    fim = model.fim if suffix else None
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
    if fim is not None and suffix:  # prefix-suffix-middle order: the completion is the middle
        suffix_ids = list(model.tokenizer.encode(suffix, add_special_tokens=False))
        ids = [*lead, fim.prefix, *ids, fim.suffix, *suffix_ids, fim.middle]
    return tuple(ids) or (model.eos_token_id,)  # an empty prompt reads as a new document too
