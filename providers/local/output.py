"""The engine's deltas as OpenAI `text_completion` bodies and stream chunks.

A plain answer is its stream's deltas joined, so both carry the same text and tokens. With
`best_of` above `n`, each prompt's `n` sequences with the highest mean token logprob are returned,
best first, indexed as OpenAI indexes choices (prompt i, rank j → i * n + j).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from providers.completion_shape import Choice, ChunkMeta, Reply, Usage, chunk_body, completion_body
from providers.local.events import Delta, JobEnd, TokenInfo
from providers.local.request_plan import JobPlan


@dataclass(slots=True)
class Collected:
    """One sequence's deltas, joined."""

    text: str = ""
    tokens: list[TokenInfo] = field(default_factory=list)
    finish_reason: str | None = None
    score: float = 0.0

    def add(self, delta: Delta) -> None:
        self.text += delta.text
        self.tokens += delta.tokens
        if delta.finish_reason is not None:
            self.finish_reason, self.score = delta.finish_reason, delta.score


def logprobs_body(tokens: Iterable[TokenInfo]) -> dict[str, list[Any]]:
    body: dict[str, list[Any]] = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
    for info in tokens:
        body["tokens"].append(info.token)
        body["token_logprobs"].append(info.logprob)
        body["top_logprobs"].append(info.top)
        body["text_offset"].append(info.offset)
    return body


def whole_answer(plan: JobPlan, sequences: dict[int, Collected], end: JobEnd, fingerprint: str) -> dict[str, Any]:
    choices = []
    for prompt in range(len(plan.prompts)):
        candidates = [sequences[prompt * plan.samples + sample] for sample in range(plan.samples)]
        if plan.samples > plan.n:
            candidates = sorted(candidates, key=lambda collected: collected.score, reverse=True)[: plan.n]
        for rank, collected in enumerate(candidates):
            choices.append(_choice(prompt * plan.n + rank, collected, plan))
    reply = Reply(choices, Usage(end.prompt_tokens, end.completion_tokens), plan.model, fingerprint)
    return completion_body([reply], [0], plan.model)


def stream_chunk(meta: ChunkMeta, delta: Delta, plan: JobPlan) -> dict[str, Any] | None:
    """The chunk of one delta; None when it carries nothing (a token whose text is not complete)."""
    if not delta.text and delta.finish_reason is None and not delta.tokens:
        return None
    logprobs = logprobs_body(delta.tokens) if plan.params.logprobs is not None else None
    finish = delta.finish_reason
    return chunk_body(meta, Choice(delta.sequence, delta.text, finish, logprobs), delta.sequence)  # type: ignore[arg-type]


def _choice(index: int, collected: Collected, plan: JobPlan) -> Choice:
    logprobs = logprobs_body(collected.tokens) if plan.params.logprobs is not None else None
    return Choice(index, collected.text, collected.finish_reason, logprobs)  # type: ignore[arg-type]
