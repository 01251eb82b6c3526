"""The engine's deltas as OpenAI `text_completion` (or, for chat, `chat.completion`) bodies and
stream chunks.

A plain answer is its stream's deltas joined, so both carry the same text and tokens. With
`best_of` above `n`, each prompt's `n` sequences with the highest mean token logprob are returned,
best first, indexed as OpenAI indexes choices (prompt i, rank j → i * n + j).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from providers.chat.shape import chat_body, chat_chunk_body, chat_logprobs
from providers.completion_shape import Choice, ChunkMeta, Reply, TokenLogprob, Usage, chunk_body, completion_body
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
    merge = chat_body if plan.api == "chat" else completion_body
    return merge([reply], [0], plan.model)


def stream_chunk(meta: ChunkMeta, delta: Delta, plan: JobPlan, first: bool = False) -> dict[str, Any] | None:
    """The chunk of one delta; None when it carries nothing (a token whose text is not complete).
    `first`: the sequence's first chunk (a chat chunk then names the assistant's role)."""
    if not delta.text and delta.finish_reason is None and not delta.tokens:
        return None
    choice = Choice(delta.sequence, delta.text, delta.finish_reason, _logprobs(delta.tokens, plan))  # type: ignore[arg-type]
    if plan.api == "chat":
        return chat_chunk_body(meta, choice, delta.sequence, first)
    return chunk_body(meta, choice, delta.sequence)


def _choice(index: int, collected: Collected, plan: JobPlan) -> Choice:
    logprobs = _logprobs(collected.tokens, plan)
    return Choice(index, collected.text, collected.finish_reason, logprobs)  # type: ignore[arg-type]


def _logprobs(tokens: list[TokenInfo], plan: JobPlan) -> dict[str, Any] | None:
    top = plan.params.logprobs
    if top is None:
        return None
    if plan.api != "chat":
        return logprobs_body(tokens)
    entries = (TokenLogprob(info.token, info.logprob or 0.0, tuple((info.top or {}).items())) for info in tokens)
    return chat_logprobs(entries, top)
