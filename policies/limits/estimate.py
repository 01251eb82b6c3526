"""How many tokens a request may use, known before the call: the prompt (estimated at about four
characters a token, or counted when it is already token ids) and the most it may generate.

A chat request's prompt is the text of its messages (and of its tools' definitions), plus a few
tokens per message for the chat template; what it may generate is `max_completion_tokens` (or the
older `max_tokens`) for each of its `n` choices. Chat has no default limit: a request that sets
none reserves `CHAT_RESERVED_TOKENS` per choice, and is charged what it used when it ends."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from gateway.api.chat import AssistantMessage, ChatRequest
from gateway.api.schemas import DEFAULT_MAX_TOKENS, CompletionRequest, prompts_of

CHARS_PER_TOKEN = 4
TOKENS_PER_MESSAGE = 4  # the chat template's role markers around each message
CHAT_RESERVED_TOKENS = 256  # per choice, for a chat request that sets no limit


@dataclass(frozen=True, slots=True)
class Estimate:
    prompt_tokens: int
    completion_tokens: int  # an upper bound: max_tokens for every choice of every prompt

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def estimate(request: CompletionRequest | ChatRequest) -> Estimate:
    if isinstance(request, ChatRequest):
        return chat_estimate(request)
    prompts = prompts_of(request.prompt)
    prompt_tokens = 0
    for prompt in prompts:  # a loop, not sum() over a generator: this runs on every request
        prompt_tokens += _tokens(prompt)
    if request.suffix:
        prompt_tokens += _tokens(request.suffix)
    choices = max(request.n or 1, request.best_of or 1)  # best_of candidates are generated and billed
    max_tokens = request.max_tokens if request.max_tokens is not None else DEFAULT_MAX_TOKENS
    # At most schemas.TOKENS_MAX: the request model refuses more.
    return Estimate(prompt_tokens=prompt_tokens, completion_tokens=max_tokens * choices * len(prompts))


def chat_estimate(request: ChatRequest) -> Estimate:
    messages = request.messages
    chars = 0
    for message in messages:
        content = message.content
        if isinstance(content, str):
            chars += len(content)
        elif content is not None:
            chars += sum(len(getattr(part, "text", None) or "") for part in content)
        if isinstance(message, AssistantMessage):  # (a getattr on the others raises inside pydantic)
            for call in message.tool_calls or ():
                chars += len(getattr(getattr(call, "function", None), "arguments", "") or "")
    if request.tools:
        chars += sum(len(tool.model_dump_json()) for tool in request.tools)
    prompt_tokens = math.ceil(chars / CHARS_PER_TOKEN) + TOKENS_PER_MESSAGE * len(messages)
    limit = request.completion_limit()
    per_choice = CHAT_RESERVED_TOKENS if limit is None else limit
    return Estimate(prompt_tokens=prompt_tokens, completion_tokens=per_choice * (request.n or 1))


def _tokens(prompt: Any) -> int:
    if prompt is None:
        return 1  # <|endoftext|>
    if isinstance(prompt, str):
        return math.ceil(len(prompt) / CHARS_PER_TOKEN)
    if isinstance(prompt, list):
        return len(prompt)
    return 0
