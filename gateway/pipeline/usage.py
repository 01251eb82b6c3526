"""Token usage of a call as the limits, budgets and metrics see it.

A plain answer reports its `usage`. A stream reports it only in its last chunk, and only when the
client asked for it (`stream_options.include_usage`); otherwise the completion is counted as one
token per content event (what OpenAI-style streams send) and the prompt keeps its estimate. A
provider stream that counts its own tokens (`UsageReportingStream`: the local engine, whose events
are text pieces, not tokens) is metered by its figures once it ended, asked for or not.
Only payloads that mention `"usage"` are parsed, so metering costs a byte search per read.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import orjson

from providers.base import CompletionStream

_USAGE = b'"usage"'


@dataclass(slots=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reported: bool = False  # from the upstream's own figures, not counted by the gateway

    def record(self, usage: Any) -> None:
        if isinstance(usage, dict):
            self.prompt_tokens = _count(usage.get("prompt_tokens"))
            self.completion_tokens = _count(usage.get("completion_tokens"))
            self.reported = True


class MeteredStream:
    """Relays a stream unchanged and fills `usage` as it flows (also when it is cut short)."""

    def __init__(
        self,
        stream: CompletionStream,
        usage: Usage,
        estimated_prompt_tokens: int,
        reported: Callable[[], dict[str, int] | None] | None = None,
    ) -> None:
        self._stream = stream
        self._usage = usage
        self._reported = reported  # the provider's own figures, read when the stream is closed
        usage.prompt_tokens = estimated_prompt_tokens

    async def __aiter__(self) -> AsyncIterator[list[bytes]]:
        usage = self._usage
        async for payloads in self._stream:
            for payload in payloads:
                if _USAGE in payload:
                    _record_chunk_usage(payload, usage)
                elif not usage.reported:
                    usage.completion_tokens += 1
            yield payloads

    async def aclose(self) -> None:
        await self._stream.aclose()
        if self._reported is not None:
            self._usage.record(self._reported())  # None (a stream cut short) keeps what was counted


def _record_chunk_usage(payload: bytes, usage: Usage) -> None:
    try:
        chunk = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return
    if isinstance(chunk, dict) and chunk.get("usage"):
        usage.record(chunk["usage"])
    elif not usage.reported:
        usage.completion_tokens += 1  # a content event whose text happens to contain the word


def _count(value: Any) -> int:
    return value if isinstance(value, int) and value >= 0 else 0
