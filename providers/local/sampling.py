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
_NUCLEUS_FIRST = 1024  # tokens sorted first when looking for a nucleus


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
    adjusted = [row for row, sequence in enumerate(rows) if sequence.bias is not None or sequence.counts is not None]
    # Adjusted on a copy: `logits` may be the model's output, or one prefill's row expanded to many.
    scores = logits.to(torch.float32, copy=bool(adjusted))
    for row in adjusted:
        _adjust(scores[row], rows[row])
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
    """Greedy rows take the most likely token; the others draw, those with a top_p below 1 from
    their nucleus. The two kinds of draw are made apart, so that a row's token (for its seed) does
    not depend on what its neighbours asked for."""
    kinds = [None if sequence.params.greedy else sequence.params.top_p < 1.0 for sequence in rows]
    if kinds[0] is not None and kinds.count(kinds[0]) == len(kinds):  # one kind of draw: no copies
        return _draw(logprobs, rows, nucleus=kinds[0])
    tokens = logprobs.argmax(dim=-1)
    for nucleus in (False, True):
        group = [row for row, kind in enumerate(kinds) if kind is nucleus]
        if group:
            index = torch.tensor(group, device=logprobs.device)
            tokens[index] = _draw(logprobs[index], [rows[row] for row in group], nucleus=nucleus)
    return tokens


def _draw(logprobs: torch.Tensor, rows: Seq[Sequence], *, nucleus: bool) -> torch.Tensor:
    """One token per row by inverse transform sampling: a uniform draw from the row's generator
    against the cumulative probabilities (in vocabulary order; most likely first in a nucleus)."""
    temperatures = [row.params.temperature for row in rows]
    if any(temperature != 1.0 for temperature in temperatures):
        logprobs = logprobs / torch.tensor(temperatures, device=logprobs.device).unsqueeze(1)
    probabilities = torch.softmax(logprobs, dim=-1)
    order = None
    if nucleus:
        top_ps = torch.tensor([row.params.top_p for row in rows], device=logprobs.device)
        probabilities, order = _nucleus(probabilities, top_ps)
    cumulative = probabilities.cumsum(dim=-1)
    draws = torch.stack([torch.rand((), generator=row.generator) for row in rows]).to(logprobs.device)
    # right=True: the first token whose cumulative mass exceeds the draw, never one of zero mass
    picked = torch.searchsorted(cumulative, (draws * cumulative[:, -1]).unsqueeze(1).contiguous(), right=True)
    picked = picked.clamp(max=cumulative.shape[1] - 1)
    if order is not None:
        picked = order.gather(1, picked)
    return picked.squeeze(1)


def _nucleus(probabilities: torch.Tensor, top_ps: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The smallest set of most likely tokens whose mass reaches top_p (sorted, the rest zeroed),
    and their ids. Sorting a whole vocabulary costs milliseconds a row, and a nucleus is usually
    far smaller: the thousand most likely are sorted first, everything only when they fall short."""
    ordered, order = probabilities.topk(min(_NUCLEUS_FIRST, probabilities.shape[1]), dim=-1)
    cumulative = ordered.cumsum(dim=-1)
    if ordered.shape[1] < probabilities.shape[1] and bool((cumulative[:, -1] < top_ps).any()):
        ordered, order = probabilities.sort(dim=-1, descending=True)
        cumulative = ordered.cumsum(dim=-1)
    return ordered.masked_fill(cumulative - ordered >= top_ps.unsqueeze(1), 0.0), order


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
