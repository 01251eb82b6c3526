"""From a step's logits to each sequence's next token and its logprobs, for the whole batch at once.

Order, as OpenAI defines it: `logit_bias` is added to the logits, then the presence and frequency
penalties are subtracted (mu[j] - c[j] * frequency - (c[j] > 0) * presence, where c[j] counts how
often token j was sampled so far in this completion). The logprobs reported (and ranked by
best_of) are those of this adjusted distribution; temperature and top_p shape only the draw.
Each sequence draws from its own generator, so its tokens do not depend on its batch neighbours.
"""

from __future__ import annotations

from collections.abc import Sequence as Seq
from dataclasses import dataclass

import torch

from providers.local.request_plan import SamplingParams
from providers.local.sequence import Sequence

INT63 = 2**63 - 1


@dataclass(frozen=True, slots=True)
class Choices:
    tokens: list[int]
    logprobs: list[float]  # of each sampled token
    tops: list[list[tuple[int, float]] | None]  # the most likely alternatives, for sequences asking logprobs


def bias_vector(params: SamplingParams, vocab_size: int, device: torch.device) -> torch.Tensor | None:
    if not params.logit_bias:
        return None
    vector = torch.zeros(vocab_size, device=device)
    for token, value in params.logit_bias:
        vector[token] = value
    return vector


def penalty_counts(params: SamplingParams, vocab_size: int, device: torch.device) -> torch.Tensor | None:
    return torch.zeros(vocab_size, device=device) if params.penalised else None


def new_generator(seed: int, sequence: int) -> torch.Generator:
    """Sequence k of a request seeded s draws the same numbers every time, and differs from k+1."""
    generator = torch.Generator()
    generator.manual_seed(hash((seed, sequence)) & INT63)
    return generator


def choose(logits: torch.Tensor, rows: Seq[Sequence]) -> Choices:
    """`logits`: [rows, vocab] of the last position, in the rows' order."""
    scores = logits.float()
    for row, sequence in enumerate(rows):
        _adjust(scores[row], sequence)
    logprobs = torch.log_softmax(scores, dim=-1)
    tokens = _sample(logprobs, rows)
    picked = logprobs.gather(1, tokens.unsqueeze(1)).squeeze(1).tolist()
    token_list = tokens.tolist()
    return Choices(token_list, picked, _tops(logprobs, rows))


def _adjust(scores: torch.Tensor, sequence: Sequence) -> None:
    params = sequence.params
    if sequence.bias is not None:
        scores += sequence.bias
    if sequence.counts is not None:
        counts = sequence.counts
        scores -= counts * params.frequency_penalty + (counts > 0).float() * params.presence_penalty


def _sample(logprobs: torch.Tensor, rows: Seq[Sequence]) -> torch.Tensor:
    tokens = logprobs.argmax(dim=-1)
    sampled = [row for row, sequence in enumerate(rows) if not sequence.params.greedy]
    if not sampled:
        return tokens
    index = torch.tensor(sampled, device=logprobs.device)
    temperatures = torch.tensor([rows[row].params.temperature for row in sampled], device=logprobs.device)
    probabilities = torch.softmax(logprobs[index] / temperatures.unsqueeze(1), dim=-1)
    top_ps = [rows[row].params.top_p for row in sampled]
    order = None
    if any(top_p < 1.0 for top_p in top_ps):
        probabilities, order = _nucleus(probabilities, torch.tensor(top_ps, device=logprobs.device))
    cumulative = probabilities.cumsum(dim=-1)
    draws = torch.stack([torch.rand((), generator=rows[row].generator) for row in sampled]).to(logprobs.device)
    # right=True: the first token whose cumulative mass exceeds the draw, never one of zero mass
    picked = torch.searchsorted(cumulative, (draws * cumulative[:, -1]).unsqueeze(1).contiguous(), right=True)
    picked = picked.clamp(max=cumulative.shape[1] - 1)
    if order is not None:
        picked = order.gather(1, picked)
    tokens[index] = picked.squeeze(1)
    return tokens


def _nucleus(probabilities: torch.Tensor, top_ps: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The smallest set of most likely tokens whose mass reaches top_p (sorted, the rest zeroed)."""
    ordered, order = probabilities.sort(dim=-1, descending=True)
    mass_before = ordered.cumsum(dim=-1) - ordered
    ordered = ordered.masked_fill(mass_before >= top_ps.unsqueeze(1), 0.0)
    return ordered, order


def _tops(logprobs: torch.Tensor, rows: Seq[Sequence]) -> list[list[tuple[int, float]] | None]:
    wanted = [sequence.params.logprobs or 0 for sequence in rows]
    most = max(wanted)
    if most == 0:
        return [None] * len(rows)
    values, ids = logprobs.topk(most, dim=-1)
    value_rows, id_rows = values.tolist(), ids.tolist()
    return [
        list(zip(id_rows[row][:k], value_rows[row][:k], strict=True)) if k else None for row, k in enumerate(wanted)
    ]
