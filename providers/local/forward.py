"""The model's forward passes: one prompt's prefill, and one decoding step for the whole batch."""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Sequence as Seq
from dataclasses import dataclass
from typing import Any

import torch
from transformers import DynamicCache, PreTrainedTokenizerBase

from providers.local.batch_cache import BatchCache
from providers.local.detokenizer import IncrementalDetokenizer
from providers.local.events import TokenInfo


@dataclass(frozen=True, slots=True)
class Prefill:
    logits: torch.Tensor  # [positions kept, vocab]: every position's, or only the last one's
    cache: DynamicCache | None


def prefill(model: Any, prompt: Seq[int], device: torch.device, *, every_position: bool, cache: bool) -> Prefill:
    ids = torch.tensor([list(prompt)], device=device)
    # A cache without the model's config keeps every layer whole (a sliding-window layer's too),
    # so that all layers join the batch with the prompt's full length.
    past = DynamicCache() if cache else None
    out = model(input_ids=ids, past_key_values=past, use_cache=cache, logits_to_keep=0 if every_position else 1)
    return Prefill(out.logits[0], past)


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
    logits: torch.Tensor | None,
    top: int | None,
    tokenizer: PreTrainedTokenizerBase,
    token_text: Callable[[int], str],
) -> tuple[str, list[TokenInfo]]:
    """The prompt's text and, when logprobs are asked for (`logits` of every position given), each
    prompt token's entry: the model's own logprobs, the first token's null (nothing predicts it)."""
    detokenizer = IncrementalDetokenizer(tokenizer)
    text = ""
    offsets = []
    for token in prompt:
        offsets.append(len(text))
        text += detokenizer.add(token)
    if logits is None:
        return text, []
    logprobs = torch.log_softmax(logits.float(), dim=-1)[:-1]
    following = torch.tensor(prompt[1:], device=logprobs.device).unsqueeze(1)
    picked = logprobs.gather(1, following).squeeze(1).tolist()
    alternatives: list[list[tuple[int, float]]] = [[] for _ in picked]
    if top:
        values, ids = logprobs.topk(top, dim=-1)
        alternatives = [list(zip(i, v, strict=True)) for i, v in zip(ids.tolist(), values.tolist(), strict=True)]
    infos = [TokenInfo(token_text(prompt[0]), None, None, 0)]
    for position, token in enumerate(prompt[1:]):
        text_of = token_text(token)
        entries = {token_text(alt): value for alt, value in alternatives[position]}
        entries.setdefault(text_of, picked[position])
        infos.append(TokenInfo(text_of, picked[position], entries, offsets[position + 1]))
    return text, infos
