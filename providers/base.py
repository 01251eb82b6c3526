"""The interface every backend implements, and the values that cross it.

Backends raise only `gateway.api.errors` exceptions: foreign errors (aiohttp, timeouts, engine
errors) are translated here at the boundary, so the pipeline maps one set of errors to HTTP.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

# The client-facing API a request came in on; its body has that API's shape (`/v1/completions`,
# `/v1/chat/completions` or `/v1/embeddings`), and so does the answer a provider returns for it.
Api = Literal["completions", "chat", "embeddings"]
APIS: frozenset[Api] = frozenset(("completions", "chat", "embeddings"))
TEXT_APIS: frozenset[Api] = frozenset(("completions", "chat"))  # what a generative model serves
COMPLETIONS_ONLY: frozenset[Api] = frozenset(("completions",))


def apis_of(provider: object) -> frozenset[Api]:
    """The client APIs a provider serves natively: its `apis` attribute (a `frozenset[Api]`, class
    or instance), or completions alone for one that does not declare it. Read once per deployment
    when a config is built; routing passes a deployment over for a request on an API it lacks."""
    declared = getattr(provider, "apis", None)
    return frozenset(declared) & APIS if isinstance(declared, frozenset) else COMPLETIONS_ONLY


# The client APIs a provider may speak itself (`NativeRequest.api`): Anthropic's Messages API, and
# OpenAI's Responses API (`/v1/responses`, on a deployment that declares `responses: native`).
NativeApi = Literal["messages", "responses"]


def native_apis_of(provider: object) -> frozenset[str]:
    """The client APIs a provider is sent a `NativeRequest` of (its `native_apis`, class or
    instance); none for one that does not declare it. Read once per deployment, as `apis_of` is."""
    declared = getattr(provider, "native_apis", None)
    return frozenset(declared) if isinstance(declared, frozenset) else frozenset()


@dataclass(slots=True)
class NativeOutcome:
    """What became of a native request, told by who made it: the deployment whose upstream answered
    it natively (None: none did, or not yet), whether the output checks changed that answer, and
    the plain answer's id (so that its bytes need not be read again to store it)."""

    deployment: str | None = None
    changed: bool = False
    response_id: str | None = None  # a plain answer's own id (a Responses answer's), as its deployment gave it


@dataclass(frozen=True, slots=True)
class NativeRequest:
    """A client API's own body, beside its chat translation, for a provider that speaks that API
    itself (an Anthropic deployment, on `/v1/messages`; an OpenAI one with `responses: native`, on
    `/v1/responses`): sent as it came, model and credential replaced, with the client headers only
    that API reads (`anthropic-beta`)."""

    body: dict[str, Any]
    headers: dict[str, str]
    api: NativeApi = "messages"
    # A Responses body whose `previous_response_id` is passed through: the deployment whose upstream
    # holds that response (None: none does), and the body with the chain written into its `input`
    # instead, which any other deployment is sent (`body_for`).
    continues: str | None = None
    rebuilt: dict[str, Any] | None = None
    # Whose the answer is, beside the body in its cache key: a stored Responses answer's id is its
    # owner's, so the cache never hands it to another key.
    partition: str = ""
    outcome: NativeOutcome = field(default_factory=NativeOutcome)

    def body_for(self, deployment: str) -> dict[str, Any]:
        """The body `deployment` is sent."""
        if self.rebuilt is None or self.continues == deployment:
            return self.body
        return self.rebuilt


@dataclass(frozen=True, slots=True)
class UpstreamRequest:
    body: dict[str, Any]  # the body to send in `api`'s shape, model already renamed for the upstream
    request_id: str
    timeout_s: float
    api: Api = "completions"
    native: NativeRequest | None = None  # what a provider speaking the client's API sends instead
    # Every chunk of its stream is read downstream (a bridged API renders them): a relay that parses
    # them to check them hands its parse along (`ParsedPayloads`).
    parsed: bool = False


class ParsedPayloads(list[bytes]):
    """The payloads of one read of a stream with the chunks a relay parsed to check them
    (`chunks[i]` is payload i's, to be read, never changed): a renderer reads those instead of
    parsing the payloads again. A layer that changes the payloads makes a list of its own."""

    __slots__ = ("chunks",)

    def __init__(self, payloads: list[bytes], chunks: list[dict[str, Any]]) -> None:
        super().__init__(payloads)
        self.chunks = chunks


@dataclass(frozen=True, slots=True)
class CompletionResult:
    raw: bytes  # the upstream's JSON bytes, relayed unchanged when nothing alters them
    body: dict[str, Any]
    native: bool = False  # `raw` is the answer of a `NativeRequest` (its API's shape); `body` its chat view


class CompletionStream(Protocol):
    """An open upstream stream. Each item is the SSE `data` payloads from one upstream read;
    iteration ends after `[DONE]` and raises a `GatewayError` if the stream fails or is cut."""

    def __aiter__(self) -> AsyncIterator[list[bytes]]: ...

    async def aclose(self) -> None:
        """Release the upstream connection; closes it at once if the stream was not finished."""


class Provider(Protocol):
    async def complete(self, request: UpstreamRequest) -> CompletionResult:
        """One whole completion; raises a `GatewayError` on any failure."""

    async def stream(self, request: UpstreamRequest) -> CompletionStream:
        """Open a stream: errors before the first event (status, connect, timeout) raise here."""

    async def aclose(self) -> None:
        """Close pooled connections; called once at shutdown."""


@runtime_checkable
class TokenizingProvider(Protocol):
    """A backend that knows its model's tokenizer (the local engine): input guardrails decode a
    prompt given as token ids with it, so the checks see the text instead of recording `skipped`."""

    async def prompt_decoder(self) -> Callable[[list[int]], str] | None:
        """Token ids to text (waits for the model to load); None when it could not load."""


@runtime_checkable
class UsageReportingStream(Protocol):
    """A stream that knows its own usage (the local engine): the gateway meters it by these figures,
    whether or not the client asked for a usage chunk, rather than counting one token per event."""

    def reported_usage(self) -> dict[str, int] | None:
        """The OpenAI `usage` object (`prompt_tokens`, `completion_tokens`) once the stream ended; None before."""
