"""How many tokens a request may use, known before the call: the prompt (estimated at about four
characters a token, or counted when it is already token ids) and the most it may generate."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from gateway.api.schemas import DEFAULT_MAX_TOKENS, CompletionRequest, prompts_of

CHARS_PER_TOKEN = 4


@dataclass(frozen=True, slots=True)
class Estimate:
    prompt_tokens: int
    completion_tokens: int  # an upper bound: max_tokens for every choice of every prompt

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def estimate(request: CompletionRequest) -> Estimate:
    prompts = prompts_of(request.prompt)
    prompt_tokens = sum(_tokens(prompt) for prompt in prompts) + _tokens(request.suffix or "")
    choices = max(request.n or 1, request.best_of or 1)  # best_of candidates are generated and billed
    max_tokens = request.max_tokens if request.max_tokens is not None else DEFAULT_MAX_TOKENS
    # At most schemas.TOKENS_MAX: the request model refuses more.
    return Estimate(prompt_tokens=prompt_tokens, completion_tokens=max_tokens * choices * len(prompts))


def _tokens(prompt: Any) -> int:
    if prompt is None:
        return 1  # <|endoftext|>
    if isinstance(prompt, str):
        return math.ceil(len(prompt) / CHARS_PER_TOKEN)
    if isinstance(prompt, list):
        return len(prompt)
    return 0
