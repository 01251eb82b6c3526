"""Which deployments are sent a request's own body (native pass-through).

The pipeline reads the chat view of a native request (input guards, limits, routing) and of its
answer (usage); the body itself goes to a deployment whose provider speaks its API (an Anthropic
deployment the Messages API's, an OpenAI one with `responses: native` the Responses API's), with
what the pipeline did to the chat view written into it (an input redaction: `redaction`), and its
answer is checked where it is (`answer`, `events`; `responses_answer`, `responses_events`) and
cached as it is (`policies.cache.native_events`).
"""

from __future__ import annotations

from gateway.pipeline.guarding import GuardedCall
from gateway.pipeline.native.answer import check_native_answer
from gateway.pipeline.native.events import NativeGuardedStream
from gateway.pipeline.native.responses_answer import check_responses_answer
from gateway.pipeline.native.responses_events import ResponsesGuardedStream
from gateway.routing.deployments import Deployment
from providers.base import CompletionResult, CompletionStream, NativeRequest


def sends_native(deployment: Deployment, native: NativeRequest | None) -> bool:
    """Whether `deployment` is sent `native`'s own body (and answers in its API's shape)."""
    return native is not None and native.api in deployment.native_apis


async def check_answer(guarded: GuardedCall, result: CompletionResult, native: NativeRequest) -> CompletionResult:
    """A native answer as the output checks leave it; a changed one is told to `native.outcome`."""
    if native.api == "responses":
        checked = await check_responses_answer(guarded, result)
    else:
        checked = await check_native_answer(guarded, result)
    if checked is not result:
        native.outcome.changed = True
    return checked


def guarded_stream(stream: CompletionStream, guarded: GuardedCall, native: NativeRequest) -> CompletionStream:
    """A native stream with the output checks on its events (asked only when there are some)."""
    if native.api == "responses":
        return ResponsesGuardedStream(stream, guarded, native.outcome)
    return NativeGuardedStream(stream, guarded)
