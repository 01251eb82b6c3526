"""How many tokens a request may use, known before the call: the prompt (estimated at about four
characters a token, or counted when it is already token ids) and the most it may generate.

A chat request's prompt is every text its upstream's model reads (`gateway.api.chat_texts`: the
messages, tools and their schemas, response_format, unknown fields at every level, keys included),
plus a few tokens per message for the chat template, plus its media at fixed figures: an image
`IMAGE_TOKENS` (`IMAGE_TOKENS_LOW` at `detail: low`; OpenAI's count for a 1024x1024 image at high
detail, and for any image at low), audio one token per `AUDIO_BYTES_PER_TOKEN` bytes of its data
(OpenAI's 10 tokens a second of audio, for 16-bit 24 kHz WAV and 128 kbit/s MP3), a file one token per
`CHARS_PER_TOKEN` bytes of its data (as if it were text) or `FILE_ID_TOKENS` when given by id (its
size unknown here). What it may generate is `max_completion_tokens` (or the older `max_tokens`) for
each of its `n` choices. Chat has no default limit: a request that sets none reserves
`CHAT_RESERVED_TOKENS` per choice, and is charged what it used when it ends."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gateway.api.chat import ChatRequest
from gateway.api.chat_texts import chat_texts, json_chars
from gateway.api.embeddings import EmbeddingsRequest
from gateway.api.schemas import DEFAULT_MAX_TOKENS, CompletionRequest, prompts_of

CHARS_PER_TOKEN = 4
TOKENS_PER_MESSAGE = 4  # the chat template's role markers around each message
CHAT_RESERVED_TOKENS = 256  # per choice, for a chat request that sets no limit
IMAGE_TOKENS = 765  # an image at `detail` high or auto: OpenAI's count for 1024x1024 (85 + 4 tiles x 170)
IMAGE_TOKENS_LOW = 85  # an image at `detail: low`, whatever its size
AUDIO_BYTES_PER_TOKEN = {"wav": 4800, "mp3": 1600}  # 10 tokens a second: 16-bit 24 kHz mono; 128 kbit/s
FILE_ID_TOKENS = 1000  # a file given by id, whose size the gateway does not know


@dataclass(frozen=True, slots=True)
class Estimate:
    prompt_tokens: int
    completion_tokens: int  # an upper bound: max_tokens for every choice of every prompt

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def estimate(
    request: CompletionRequest | ChatRequest | EmbeddingsRequest, body: Mapping[str, Any] | None = None
) -> Estimate:
    """`body`: the request's body as it goes upstream (its unknown fields are counted too);
    without it, the request's own fields."""
    if isinstance(request, ChatRequest):
        return chat_estimate(request, body)
    if isinstance(request, EmbeddingsRequest):
        return embeddings_estimate(request)
    prompts = prompts_of(request.prompt)
    prompt_tokens = 0
    for prompt in prompts:  # a loop, not sum() over a generator: this runs on every request
        prompt_tokens += _tokens(prompt)
    if request.suffix:
        prompt_tokens += _tokens(request.suffix)
    unknown = request.__pydantic_extra__  # the attribute, not the `model_extra` property: a call fewer
    if unknown:
        # Fields the reference does not know go upstream as they are (vLLM renders some into the
        # prompt): their text counts like the prompt's.
        extra = 0
        for name, value in unknown.items():
            extra += len(name) + json_chars(value)
        prompt_tokens += math.ceil(extra / CHARS_PER_TOKEN)
    choices = max(request.n or 1, request.best_of or 1)  # best_of candidates are generated and billed
    max_tokens = request.max_tokens if request.max_tokens is not None else DEFAULT_MAX_TOKENS
    # At most schemas.TOKENS_MAX: the request model refuses more.
    return Estimate(prompt_tokens=prompt_tokens, completion_tokens=max_tokens * choices * len(prompts))


def chat_estimate(request: ChatRequest, body: Mapping[str, Any] | None = None) -> Estimate:
    sent = body if body is not None else request.model_dump(by_alias=True, exclude_none=True)
    found = chat_texts(sent, count_only=True)
    chars = found.chars
    media = 0
    for item in found.media:
        media += _media_tokens(item.kind, item.data_chars, item.detail)
    prompt_tokens = math.ceil(chars / CHARS_PER_TOKEN) + TOKENS_PER_MESSAGE * len(request.messages) + media
    limit = request.completion_limit()
    per_choice = CHAT_RESERVED_TOKENS if limit is None else limit
    return Estimate(prompt_tokens=prompt_tokens, completion_tokens=per_choice * (request.n or 1))


def embeddings_estimate(request: EmbeddingsRequest) -> Estimate:
    """Input tokens only (an embedding generates none): each text at `CHARS_PER_TOKEN`, token ids counted."""
    prompt_tokens = 0
    for item in request.inputs():
        prompt_tokens += math.ceil(len(item) / CHARS_PER_TOKEN) if isinstance(item, str) else len(item)
    return Estimate(prompt_tokens=prompt_tokens, completion_tokens=0)


def _media_tokens(kind: str, data_chars: int, detail: str | None) -> int:
    data_bytes = data_chars * 3 // 4  # base64
    if kind == "image":
        return IMAGE_TOKENS_LOW if detail == "low" else IMAGE_TOKENS
    if kind == "audio":
        return math.ceil(data_bytes / AUDIO_BYTES_PER_TOKEN.get(detail or "", min(AUDIO_BYTES_PER_TOKEN.values())))
    return math.ceil(data_bytes / CHARS_PER_TOKEN) if data_chars else FILE_ID_TOKENS


def _tokens(prompt: Any) -> int:
    if prompt is None:
        return 1  # <|endoftext|>
    if isinstance(prompt, str):
        return math.ceil(len(prompt) / CHARS_PER_TOKEN)
    if isinstance(prompt, list):
        return len(prompt)
    return 0
