"""What the engine's worker hands back to a request, step by step (a leaf module: no torch)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class TokenInfo:
    """One token of a choice's `logprobs`: its text, logprob (None for the first prompt token of an
    echo), the most likely alternatives with the token itself, and where its text starts."""

    token: str
    logprob: float | None
    top: dict[str, float] | None
    offset: int


@dataclass(slots=True)
class Delta:
    """New text of one sequence; `sequence` is prompt * samples + sample within the request."""

    sequence: int
    text: str
    tokens: list[TokenInfo] = field(default_factory=list)  # empty unless logprobs were asked for
    finish_reason: str | None = None
    score: float = 0.0  # with the finish: mean logprob of the sampled tokens, what best_of ranks by


@dataclass(frozen=True, slots=True)
class JobEnd:
    prompt_tokens: int
    completion_tokens: int  # every sampled token of every sequence, best_of's discarded ones too


@dataclass(frozen=True, slots=True)
class JobFailed:
    message: str


Event = Delta | JobEnd | JobFailed
