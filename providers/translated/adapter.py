"""The small interface between the generic translating provider and one foreign API's adapter.

An adapter knows one API's shapes (request, answer, stream events, error body) and nothing about
HTTP; `providers.translated.provider.TranslatedProvider` does the HTTP, the fan-out over prompts, the
error mapping and the merging, the same for every API.

One adapter serves both client APIs: `plan` is told which one the body is shaped for (a
Completions body, or a Chat Completions one), and each planned call carries it, so that `reply` and
the stream translator build what that API answers (chat choices carry tool calls; logprobs come in
the API's shape). The provider then assembles a `text_completion` or a `chat.completion` from the
neutral parts. An upstream that speaks the client's API already is relayed (`Plan.relay`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from gateway.api.errors import UpstreamError
from providers.base import Api
from providers.completion_shape import Choice, Reply, Usage
from providers.upstream.errors import SecretsLike, scrub

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class UpstreamCall:
    url: str
    body: dict[str, Any]
    choices: int  # how many choices this call answers with (its n, or 1 when n is fanned out)
    api: Api = "completions"  # the client API whose shape the answer takes
    headers: Mapping[str, str] = field(default_factory=dict)  # besides the adapter's (`anthropic-beta`)


@dataclass(frozen=True, slots=True)
class Plan:
    """The upstream calls one Completions request becomes, in the order of its choices."""

    calls: list[UpstreamCall]
    model: str  # reported as the answer's `model` when the upstream names none
    include_usage: bool = False  # a stream ends with a usage chunk (`stream_options.include_usage`)
    # The one call's answer (or stream events) already has the client API's shape: relayed as it
    # came, after the checks every answer gets (a JSON object; no error event mid-stream).
    relay: bool = False


class AnswerProblem(Exception):
    """An upstream answer (or stream event) the adapter cannot translate, or an error event in a
    stream; the provider adds the deployment's name, scrubs credentials and raises a 502."""

    def __init__(self, message: str, code: str = "upstream_malformed", upstream_status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.upstream_status = upstream_status  # the HTTP status an error event stands for, if it says


# What translating an answer of an unexpected shape raises (a missing key, a string for a number…).
SHAPE_ERRORS = (AnswerProblem, KeyError, IndexError, TypeError, ValueError, AttributeError)


def as_answer_problem(exc: Exception) -> AnswerProblem:
    if isinstance(exc, AnswerProblem):
        return exc
    return AnswerProblem(f"answered in a shape the gateway cannot translate ({type(exc).__name__})")


def stream_error_event(error: dict[str, Any]) -> AnswerProblem:
    """An `{"error": {...}}` event in a stream (OpenAI-compatible servers, Gemini); a numeric `code`
    there is the HTTP status it stands for."""
    status = error.get("code")
    return AnswerProblem(
        f"failed mid-stream: {error.get('message')}",
        code="upstream_stream_error",
        upstream_status=status if isinstance(status, int) and 400 <= status < 600 else None,
    )


def answer_error(problem: AnswerProblem, deployment: str, secrets: SecretsLike) -> UpstreamError:
    """The 502 for an answer that could not be translated (or an error event in a stream), naming
    the deployment, scrubbed of every credential before it is logged or sent."""
    message = scrub(problem.message, secrets)
    log.warning("upstream of deployment %s: %s", deployment, message)
    text = f"The upstream of deployment '{deployment}' {message}"
    return UpstreamError(text, code=problem.code, upstream_status=problem.upstream_status)


class StreamTranslator(Protocol):
    """Turns the parsed events of one upstream stream into choice deltas, keeping its own state."""

    @property
    def ended(self) -> bool:
        """The API's end-of-stream event was seen: stop reading."""

    @property
    def complete_at_eof(self) -> bool:
        """The answer is whole if the upstream closes the stream now (APIs with no end event)."""

    @property
    def usage(self) -> Usage | None: ...

    def feed(self, event: dict[str, Any]) -> list[Choice]: ...


@dataclass(frozen=True, slots=True)
class Embedded:
    """One call's embeddings, in the order of its inputs, and the input tokens the upstream counted
    (None when its answer does not say)."""

    vectors: list[list[float]]
    prompt_tokens: int | None = None


class Adapter(Protocol):
    @property
    def api(self) -> str:
        """The API's name, for messages: 'the Anthropic Messages API'."""

    @property
    def end_marker(self) -> str:
        """What marks a whole stream, for the truncation message: '[DONE]', 'message_stop'."""

    @property
    def headers(self) -> Mapping[str, str]:
        """Sent with every call: credential, version headers, the deployment's extra headers."""

    def plan(self, body: dict[str, Any], stream: bool, api: Api) -> Plan:
        """Check the body, shaped for the client API `api` (raising `InvalidRequest` for what
        cannot be honoured), and plan the calls."""

    def reply(self, call: UpstreamCall, body: dict[str, Any]) -> Reply:
        """Translate one non-streamed answer for `call.api`; raises `AnswerProblem` if it has the
        wrong shape."""

    def translator(self, call: UpstreamCall) -> StreamTranslator: ...

    def error_answer(self, raw: bytes) -> bytes:
        """An upstream error body rewritten as OpenAI's envelope (message, type, param, code)."""


@runtime_checkable
class EmbeddingAdapter(Adapter, Protocol):
    """An adapter whose API also embeds: `plan` takes an Embeddings body (`api="embeddings"`), and
    each call's answer becomes its vectors here; the provider writes OpenAI's answer from them."""

    def embedded(self, call: UpstreamCall, body: dict[str, Any]) -> Embedded:
        """One call's vectors; raises `AnswerProblem` if the answer has the wrong shape."""
