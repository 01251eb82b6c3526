"""The model's forward passes: one prompt's prefill, and one decoding step for the whole batch.

A prefill that scores the prompt (`echo` with `logprobs`) runs in chunks of `PROMPT_CHUNK`
positions, each chunk attending to the cache of the ones before: the logits of a chunk (positions
x vocabulary) are reduced to its tokens' logprobs and top alternatives before the next one is
computed, so memory is bounded by one chunk whatever the prompt's length.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Sequence as Seq
from dataclasses import dataclass
from typing import Any

import torch
from transformers import DynamicCache, PreTrainedTokenizerBase

from providers.local.batch_cache import BatchCache
from providers.local.events import TokenInfo
from providers.local.text.detokenizer import IncrementalDetokenizer

PROMPT_CHUNK = 256  # positions whose logits a prompt-scoring prefill holds at once


@dataclass(frozen=True, slots=True)
class PromptScores:
    """The model's logprobs of each prompt token after the first, and the `top` most likely
    alternatives at each of those positions (empty lists when none were asked for)."""

    picked: list[float]
    alternatives: list[list[tuple[int, float]]]


@dataclass(frozen=True, slots=True)
class Prefill:
    logits: torch.Tensor  # [1, vocab]: the last position's
    cache: DynamicCache | None
    scores: PromptScores | None = None  # when the prompt was scored


def prefill(
    model: Any, prompt: Seq[int], device: torch.device, *, score_prompt: bool, top: int | None, cache: bool
) -> Prefill:
    # A cache without the model's config keeps every layer whole (a sliding-window layer's too),
    # so that all layers join the batch with the prompt's full length.
    if not score_prompt:
        past = DynamicCache() if cache else None
        whole = torch.tensor([list(prompt)], device=device)
        out = model(input_ids=whole, past_key_values=past, use_cache=cache, logits_to_keep=1)
        return Prefill(out.logits[0, -1:], past)
    chunk = max(1, PROMPT_CHUNK)
    ids = list(prompt)
    past = DynamicCache() if cache or len(ids) > chunk else None  # later chunks read the earlier ones' keys
    scores = PromptScores([], [])
    last: torch.Tensor | None = None
    for start in range(0, len(ids), chunk):
        piece = ids[start : start + chunk]
        out = model(
            input_ids=torch.tensor([piece], device=device),
            past_key_values=past,
            use_cache=past is not None,
            logits_to_keep=0,
        )
        logits = out.logits[0]  # [len(piece), vocab]: position p's distribution of token p + 1
        _score(logits, ids[start + 1 : start + 1 + len(piece)], top, scores)
        last = logits[-1:].clone()  # not a view: the chunk's logits are freed before the next one
        del out, logits
    assert last is not None  # a prompt has at least one token
    return Prefill(last, past if cache else None, scores)


def _score(logits: torch.Tensor, following: list[int], top: int | None, scores: PromptScores) -> None:
    """Add one chunk's positions to `scores` (the prompt's last position predicts no prompt token)."""
    if not following:
        return
    logprobs = torch.log_softmax(logits[: len(following)].float(), dim=-1)
    tokens = torch.tensor(following, device=logprobs.device).unsqueeze(1)
    scores.picked.extend(logprobs.gather(1, tokens).squeeze(1).tolist())
    if top:
        values, ids = logprobs.topk(top, dim=-1)
        scores.alternatives.extend(
            list(zip(i, v, strict=True)) for i, v in zip(ids.tolist(), values.tolist(), strict=True)
        )
    else:
        scores.alternatives.extend([] for _ in following)


def decode_step(
    model: Any, tokens: Seq[int], positions: Seq[int], batch: BatchCache, device: torch.device
) -> torch.Tensor:
    """Feed each row of the batch one token at its own position; the next-token logits [rows, vocab]."""
    ids = torch.tensor(tokens, device=device).unsqueeze(1)
    at = torch.tensor(positions, device=device).unsqueeze(1)
    out = model(input_ids=ids, attention_mask=batch.step_mask(), position_ids=at, past_key_values=batch, use_cache=True)
    batch.advance()
    logits: torch.Tensor = out.logits[:, -1, :]
    return logits


def echo_of(
    prompt: Seq[int],
    scores: PromptScores | None,
    tokenizer: PreTrainedTokenizerBase,
    token_text: Callable[[int], str],
) -> tuple[str, list[TokenInfo]]:
    """The prompt's text and, when logprobs are asked for (the prompt's `scores` given), each
    prompt token's entry: the model's own logprobs, the first token's null (nothing predicts it)."""
    detokenizer = IncrementalDetokenizer(tokenizer)
    text = ""
    offsets = []
    for token in prompt:
        offsets.append(len(text))
        text += detokenizer.add(token)
    if scores is None:
        return text, []
    picked, alternatives = scores.picked, scores.alternatives
    infos = [TokenInfo(token_text(prompt[0]), None, None, 0)]
    for position, token in enumerate(prompt[1:]):
        text_of = token_text(token)
        entries = {token_text(alt): value for alt, value in alternatives[position]}
        entries.setdefault(text_of, picked[position])
        infos.append(TokenInfo(text_of, picked[position], entries, offsets[position + 1]))
    return text, infos
