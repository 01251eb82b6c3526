"""When the client's own body may go upstream as it came, and when its answer may come back so.

The pipeline reads the chat view of a native request (input guards, limits, routing) and of its
answer (output guards, usage). The native body is sent only when what the pipeline did to the
chat view needs nothing of it (an input redaction is written into it: `redaction`): a stream that
output guardrails read, or a request a cache policy stores, takes the translated path (the stream
guard and the cache hold chat chunks).
A plain answer the output guards passed unchanged is relayed as it came; one they withheld or
rewrote is the rewritten chat view, translated back.
"""

from __future__ import annotations

import orjson

from gateway.pipeline.guarding import GuardedCall
from policies.cache import CachePlan
from providers.base import CompletionResult


def native_allowed(guarded: GuardedCall | None, cache: CachePlan | None, stream: bool) -> bool:
    if cache is not None and cache.key is not None:
        return False
    return not (guarded is not None and stream and guarded.output)


def choices_of(result: CompletionResult) -> bytes | None:
    """A native answer's chat choices before the output guards (which rewrite them in place)."""
    return orjson.dumps(result.body.get("choices")) if result.native else None


def keep_native(before: CompletionResult, choices: bytes | None, checked: CompletionResult) -> CompletionResult:
    """The native answer itself when the output guards left every choice of its chat view as it
    was (`choices`, from `choices_of`); otherwise what they made of it (chat, translated back at
    the edge)."""
    if choices is None or orjson.dumps(checked.body.get("choices")) != choices:
        return checked
    return CompletionResult(before.raw, checked.body, native=True)
