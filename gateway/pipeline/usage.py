"""Token usage of a call as the limits, budgets and metrics see it.

A plain answer reports its `usage`. A stream reports it only in its last chunk, and only when the
client asked for it (`stream_options.include_usage`); otherwise the completion is counted as one
token per content event (what OpenAI-style streams send) and the prompt keeps its estimate. A
provider stream that counts its own tokens (`UsageReportingStream`: the local engine, whose events
are text pieces, not tokens) is metered by its figures once it ended, asked for or not.
Only payloads that mention `"usage"` are parsed, so metering costs a byte search per read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

_USAGE = b'"usage"'


@dataclass(slots=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0  # of the prompt tokens, those the upstream read from its prompt cache
    cache_write_tokens: int = 0  # of the prompt tokens, those it wrote to it (Anthropic's cache creation)
    reported: bool = False  # from the upstream's own figures, not counted by the gateway

    def record(self, usage: Any) -> None:
        if isinstance(usage, dict):
            prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
            # Counts as sent, when they are counts (inline: this runs on every answer).
            self.prompt_tokens = prompt if type(prompt) is int and prompt >= 0 else 0
            self.completion_tokens = completion if type(completion) is int and completion >= 0 else 0
            details = usage.get("prompt_tokens_details")
            cached = details.get("cached_tokens") if type(details) is dict else 0
            self.cached_tokens = cached if type(cached) is int and cached >= 0 else 0
            written = details.get("cache_write_tokens") if type(details) is dict else 0
            self.cache_write_tokens = written if type(written) is int and written >= 0 else 0
            self.reported = True

    def meter(self, payloads: list[bytes]) -> None:
        """Count one read of a stream's events (a method, not a stream wrapper: one call per read
        is all metering costs the relay)."""
        for payload in payloads:
            if _USAGE in payload:
                _record_chunk_usage(payload, self)
            elif not self.reported:
                self.completion_tokens += 1


def _record_chunk_usage(payload: bytes, usage: Usage) -> None:
    try:
        chunk = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return
    if isinstance(chunk, dict) and chunk.get("usage"):
        usage.record(chunk["usage"])
    elif not usage.reported:
        usage.completion_tokens += 1  # a content event whose text happens to contain the word
