"""A built-in upstream that needs no server, model or credential (`type: mock`).

Embeddings requests get unit vectors derived from each input (the same input, the same vector;
`embedding_dimensions` wide, shortened to `dimensions` when asked) and their words counted as tokens.
It answers every Completions and Chat Completions request with text derived deterministically from
the request (the same prompt or messages, seed and sample give the same words), at a configurable
latency and speed and with a configurable share of failures, and counts its usage honestly. A chat
request with `tools` whose `tool_choice` requires a call (`required`, or a named function) is
answered with a call of that function (the first one for `required`), its arguments a JSON object
derived from the function's parameters; `auto` and `none` are answered with text. The quick start runs against it;
so can a client's CI or a load test that should not pay for tokens.

Words are the mock's tokens: a prompt is counted as its words and punctuation marks, a completion
as the words it produced. Plain and streamed answers are cut from one precomputed sample, so they
always agree.

It is the shipped config's first deployment, open with no keys, so it has the local engine's
bounds (`max_sequences_per_request`, `max_tokens_per_request`: a 400 naming the field, checked on
the event loop before any work), and what work they leave is done off the loop when it is large:
the answer is computed in the deployment's own thread, and a stream yields to the loop between
steps, so one request never holds the loop for the others.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import random
import re
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import orjson
from pydantic import Field

from gateway.api.embeddings import MAX_DIMENSIONS, inputs_of
from gateway.api.errors import GatewayError, InvalidRequest, UpstreamTimeout
from providers import embeddings
from providers.base import APIS, Api, CompletionResult, Provider, UpstreamRequest
from providers.chat.params import max_completion_tokens
from providers.completion_params import choices_per_prompt
from providers.completion_shape import (
    ChunkMeta,
    FinishReason,
    Usage,
    new_completion_id,
    usage_chunk_body,
)
from providers.request_bounds import BoundedOptions, RequestLimits, chat_names, check_sequences, check_tokens
from providers.upstream.errors import upstream_status_error

# The words of derived text (and what a token id stands for); no cryptography anywhere here, so
# the standard pseudo-random generator is the right tool (S311 below).
_VOCABULARY = (
    "the", "gateway", "answers", "every", "request", "with", "words", "chosen", "from", "prompt", "so",
    "tests", "and", "demos", "can", "run", "without", "a", "model", "key", "or", "network", "this",
    "reply", "is", "mock", "says", "nothing", "true", "about", "it", "only", "looks", "like", "text",
    "streams", "in", "tokens", "counts", "its", "usage", "ends", "when", "told",
)  # fmt: skip
_WORD = re.compile(r"\w+|[^\w\s]")
_MIN_LENGTH, _MAX_LENGTH = 8, 48  # tokens a sample runs for when max_tokens does not stop it first
# Characters and tokens a request may make the mock go through on the event loop (a millisecond or
# so); a larger one is computed in the deployment's thread.
INLINE_WORK = 8192
_STREAM_SLICE = 256  # chunks a stream sends before it lets the loop serve others


class MockOptions(BoundedOptions):
    model: str | None = None  # the model named in answers; unset: the client's `model`
    reply: str | None = None  # fixed text for every choice (cut by max_tokens and stop); unset: derived
    latency_ms: Annotated[float, Field(ge=0, le=600_000)] = 0  # before the answer, or a stream's first token
    tokens_per_s: Annotated[float, Field(gt=0)] | None = None  # per choice; unset: every token at once
    error_rate: Annotated[float, Field(ge=0, le=1)] = 0  # share of calls that fail as an upstream would
    error_status: Literal[429, 500, 502, 503, 504] = 503  # the failing calls' upstream HTTP status
    seed: int | None = None  # of the failure draws (so a test can replay them); unset: random
    embedding_dimensions: Annotated[int, Field(ge=1, le=MAX_DIMENSIONS)] = 256  # a vector's width
    embedding_shortening: bool = True  # `dimensions` honoured (as OpenAI's v3 models); false: a 400 naming it
    # max_sequences_per_request, max_tokens_per_request (BoundedOptions): as the local engine's.


@dataclass(frozen=True, slots=True)
class _Sample:
    """One choice, precomputed: the pieces a stream sends (echoed prompt first) and its ending."""

    pieces: tuple[str, ...]
    logprobs: tuple[float, ...]  # one per piece
    finish_reason: FinishReason
    echoed: int  # how many leading pieces are the echoed prompt


def create(deployment: str, options: MockOptions, credential: str | None) -> Provider:
    return MockProvider(deployment, options)


class MockProvider:
    apis: frozenset[Api] = APIS

    def __init__(self, deployment: str, options: MockOptions) -> None:
        self._deployment = deployment
        self._options = options
        self._failures = random.Random(options.seed)  # noqa: S311
        self._limits = RequestLimits.of(options)
        # The most tokens a sample runs for by itself: the reply's, or the derived text's longest.
        self._longest = _MAX_LENGTH if options.reply is None else len(_tokens(options.reply))
        # Large answers are computed here, one at a time, never on the event loop (started on first use).
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"mock:{deployment}")

    async def complete(self, request: UpstreamRequest) -> CompletionResult:
        if request.api == "embeddings":
            return await self._embed(request)
        try:
            async with asyncio.timeout(request.timeout_s):
                answer, result = await self._prepare(request, whole=True)
                await self._start()
                if self._options.tokens_per_s is not None:
                    await asyncio.sleep(answer.longest / self._options.tokens_per_s)
        except TimeoutError:
            raise self._timeout(request.timeout_s) from None
        assert result is not None
        return result

    async def stream(self, request: UpstreamRequest) -> MockStream:
        try:
            async with asyncio.timeout(request.timeout_s):
                answer, _ = await self._prepare(request, whole=False)
                await self._start()
        except TimeoutError:
            raise self._timeout(request.timeout_s) from None
        return MockStream(answer, self._options.tokens_per_s)

    async def aclose(self) -> None:
        self._worker.shutdown(wait=False, cancel_futures=True)

    async def _prepare(
        self, request: UpstreamRequest, *, whole: bool
    ) -> tuple[_Answer | _ChatAnswer, CompletionResult | None]:
        """The answer (and, `whole`, its body and bytes): refused on the loop when the request is
        past the bounds, computed in the deployment's thread when it is large."""
        check = _check_completions if request.api == "completions" else _check_chat
        work = check(request.body, self._limits, self._longest)
        build = functools.partial(_build, request, self._options, self._limits, self._longest, whole=whole)
        if work <= INLINE_WORK:
            return build()
        return await asyncio.get_running_loop().run_in_executor(self._worker, build)

    async def _embed(self, request: UpstreamRequest) -> CompletionResult:
        body, width = request.body, self._options.embedding_dimensions
        shortens = self._options.embedding_shortening
        dimensions = embeddings.check_dimensions(body, width, shortens=shortens, deployment=self._deployment)
        try:
            async with asyncio.timeout(request.timeout_s):
                await self._start()
        except TimeoutError:
            raise self._timeout(request.timeout_s) from None
        inputs = inputs_of(body.get("input"))
        model = self._options.model or str(body.get("model") or "")
        build = functools.partial(_embeddings, inputs, width, dimensions, model, body.get("encoding_format"))
        if len(inputs) * width <= INLINE_WORK:
            return build()
        return await asyncio.get_running_loop().run_in_executor(self._worker, build)

    async def _start(self) -> None:
        if self._options.latency_ms:
            await asyncio.sleep(self._options.latency_ms / 1000)
        if self._options.error_rate and self._failures.random() < self._options.error_rate:
            raise self._failure()

    def _failure(self) -> GatewayError:
        status = self._options.error_status
        error = {"message": f"mock failure (error_rate {self._options.error_rate:g})", "type": "server_error"}
        headers = {"retry-after": "1"} if status == 429 else {}
        return upstream_status_error(
            status, orjson.dumps({"error": error}), headers, deployment=self._deployment, secrets=()
        )

    def _timeout(self, timeout_s: float) -> UpstreamTimeout:
        return UpstreamTimeout(f"The mock deployment '{self._deployment}' did not answer within {timeout_s:g} s.")


class MockStream:
    """A `CompletionStream`: one read per token step (every choice's next piece), then the usage."""

    def __init__(self, answer: _Answer | _ChatAnswer, tokens_per_s: float | None) -> None:
        self._answer = answer
        self._tokens_per_s = tokens_per_s
        self._ended = False

    async def __aiter__(self) -> AsyncIterator[list[bytes]]:
        answer = self._answer
        started = time.monotonic()
        sent = 0  # chunks since the loop last served others
        for step in range(answer.longest):
            if self._tokens_per_s is not None and step:
                await asyncio.sleep(max(0.0, started + step / self._tokens_per_s - time.monotonic()))
            elif sent >= _STREAM_SLICE:  # a reader that never waits would otherwise take the whole stream at once
                await asyncio.sleep(0)
                sent = 0
            chunks = [orjson.dumps(answer.chunk(index, step)) for index in answer.active(step)]
            sent += len(chunks)
            yield chunks
        if answer.include_usage:
            yield [orjson.dumps(answer.usage_chunk())]
        self._ended = True

    def reported_usage(self) -> dict[str, int] | None:
        """The usage once the stream ended (a `UsageReportingStream`): the gateway meters by it, as
        echoed prompts and text cut at a stop make one event per token the wrong count."""
        return self._answer.usage.as_dict() if self._ended else None

    async def aclose(self) -> None:
        return None


class _Answer:
    """The choices and usage of one request, as OpenAI numbers them (prompt i, sample j → i·n + j)."""

    def __init__(self, body: dict[str, Any], options: MockOptions, limits: RequestLimits, longest: int) -> None:
        prompts = _prompts(body.get("prompt"))
        n = choices_per_prompt(body)
        drawn = max(n, body.get("best_of") or 1)  # best_of samples are generated (and paid for); n returned
        max_tokens = body.get("max_tokens", 16)
        prompt_tokens = sum(map(len, prompts)) * (n if body.get("echo") else 1)
        asked = (longest if max_tokens is None else max_tokens) * len(prompts) * drawn
        check_tokens(prompt_tokens, asked, limits.tokens, exact=True)
        stops = body.get("stop") or []
        stops = [stops] if isinstance(stops, str) else [stop for stop in stops if stop]
        greedy = body.get("temperature") == 0
        logprobs = body.get("logprobs")
        self.meta = ChunkMeta(model=options.model or str(body.get("model") or "mock"))
        self.include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        self.logprobs: int | None = logprobs if isinstance(logprobs, int) else None
        self.samples: list[_Sample] = []
        self.usage = Usage()
        for prompt in prompts:
            self.usage.prompt_tokens += len(prompt)
            for sample in range(drawn):
                key = (prompt, body.get("seed"), 0 if greedy else sample)
                generated, finish = _generate(key, options.reply, max_tokens, stops)
                self.usage.completion_tokens += len(generated)
                if sample < n:
                    echoed = prompt if body.get("echo") else ()
                    pieces = (*echoed, *_cut(generated, stops))
                    self.samples.append(_Sample(pieces, _logprobs(key, len(pieces)), finish, len(echoed)))
        self.longest = max((len(sample.pieces) for sample in self.samples), default=0) or 1

    def usage_chunk(self) -> dict[str, Any]:
        return usage_chunk_body(self.meta, self.usage)

    def active(self, step: int) -> Iterator[int]:
        """The choices with a piece to send at this step (every choice sends at least one chunk)."""
        for index, sample in enumerate(self.samples):
            if step < len(sample.pieces) or (step == 0 and not sample.pieces):
                yield index

    def chunk(self, index: int, step: int) -> dict[str, Any]:
        sample = self.samples[index]
        last = step >= len(sample.pieces) - 1
        text = sample.pieces[step] if sample.pieces else ""
        choice = {
            "text": text,
            "index": index,
            "logprobs": self._logprobs(sample, step, step + 1, offset=0) if sample.pieces else None,
            "finish_reason": sample.finish_reason if last else None,
        }
        return {
            "id": self.meta.id,
            "object": "text_completion",
            "created": self.meta.created,
            "model": self.meta.model,
            "choices": [choice],
        }

    def body(self) -> dict[str, Any]:
        choices = [
            {
                "text": "".join(sample.pieces),
                "index": index,
                "logprobs": self._logprobs(sample, 0, len(sample.pieces), offset=0),
                "finish_reason": sample.finish_reason,
            }
            for index, sample in enumerate(self.samples)
        ]
        return {
            "id": new_completion_id(),
            "object": "text_completion",
            "created": self.meta.created,
            "model": self.meta.model,
            "choices": choices,
            "usage": self.usage.as_dict(),
        }

    def _logprobs(self, sample: _Sample, start: int, end: int, offset: int) -> dict[str, Any] | None:
        """Completions-style logprobs of pieces [start, end): the first echoed token has none."""
        if self.logprobs is None:
            return None
        offset += sum(len(piece) for piece in sample.pieces[:start])
        result: dict[str, list[Any]] = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
        for position in range(start, end):
            piece, logprob = sample.pieces[position], sample.logprobs[position]
            first_echoed = position == 0 and sample.echoed > 0
            result["tokens"].append(piece)
            result["token_logprobs"].append(None if first_echoed else logprob)
            result["top_logprobs"].append(None if first_echoed else _alternatives(piece, logprob, self.logprobs))
            result["text_offset"].append(offset)
            offset += len(piece)
        return result


def _build(
    request: UpstreamRequest, options: MockOptions, limits: RequestLimits, longest: int, *, whole: bool
) -> tuple[_Answer | _ChatAnswer, CompletionResult | None]:
    answer: _Answer | _ChatAnswer
    if request.api == "completions":
        answer = _Answer(request.body, options, limits, longest)
    else:
        with chat_names():
            answer = _ChatAnswer(request.body, options, limits, longest)
    if not whole:
        return answer, None
    body = answer.body()
    return answer, CompletionResult(orjson.dumps(body), body)


def _check_completions(body: dict[str, Any], limits: RequestLimits, longest: int) -> int:
    """The bounds that need no tokenising (prompts * samples; max_tokens * sequences, with the
    prompts given as token ids), and the work the request leaves: characters and tokens."""
    prompt = body.get("prompt")
    items = [prompt] if prompt is None or isinstance(prompt, str) or (prompt and isinstance(prompt[0], int)) else prompt
    n = choices_per_prompt(body)
    best_of = body.get("best_of")
    drawn = max(n, best_of or 1)
    check_sequences(len(items), n, best_of, drawn, limits.sequences)
    max_tokens = body.get("max_tokens", 16)
    per_sample = longest if max_tokens is None else max_tokens
    copies = n if body.get("echo") else 1  # each choice repeats its prompt
    ids = sum(len(item) for item in items if isinstance(item, list))
    check_tokens(ids * copies, per_sample * len(items) * drawn, limits.tokens, exact=False)
    characters = sum(len(item) for item in items if isinstance(item, str))
    return (characters + ids) * copies + min(per_sample, longest) * len(items) * drawn


def _check_chat(body: dict[str, Any], limits: RequestLimits, longest: int) -> int:
    """As `_check_completions`, for a chat body (one prompt: the messages)."""
    n = choices_per_prompt(body)
    limit = max_completion_tokens(body, None)
    per_sample = longest if limit is None else limit
    with chat_names():
        check_sequences(1, n, None, n, limits.sequences)
        check_tokens(0, per_sample * n, limits.tokens, exact=False)
    characters = sum(map(len, _message_texts(body.get("messages"))))
    called = _called_function(body)
    if called is None:
        return characters + min(per_sample, longest) * n
    parameters = called.get("parameters")  # a call's arguments: a few tokens per property of its schema
    properties = parameters.get("properties") if isinstance(parameters, dict) else None
    return characters + (len(properties) * 4 if isinstance(properties, dict) else 1) * n


@dataclass(frozen=True, slots=True)
class _ChatSample:
    """One chat choice, precomputed: its stream deltas in order (the last one ends it) and its message."""

    deltas: tuple[dict[str, Any], ...]
    logprobs: tuple[dict[str, Any] | None, ...]  # one per delta, in the chat shape
    finish_reason: str
    message: dict[str, Any]
    content_logprobs: list[dict[str, Any]] | None


class _ChatAnswer:
    """A `chat.completion` for a chat body: n choices of derived text, or of one tool call."""

    def __init__(self, body: dict[str, Any], options: MockOptions, limits: RequestLimits, longest: int) -> None:
        prompt = _tokens("\n".join(_message_texts(body.get("messages"))))
        n = choices_per_prompt(body)
        limit = max_completion_tokens(body, None)
        check_tokens(len(prompt), (longest if limit is None else limit) * n, limits.tokens, exact=True)
        stops = body.get("stop") or []
        stops = [stops] if isinstance(stops, str) else [stop for stop in stops if stop]
        greedy = body.get("temperature") == 0
        self.top: int | None = (body.get("top_logprobs") or 0) if body.get("logprobs") else None
        self.meta = ChunkMeta(model=options.model or str(body.get("model") or "mock"), id=_chat_id())
        self.include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        self.usage = Usage(prompt_tokens=len(prompt))
        self.samples: list[_ChatSample] = []
        called = _called_function(body)
        for sample in range(n):
            key = (prompt, body.get("seed"), 0 if greedy else sample)
            if called is not None:
                self.samples.append(self._call(key, called, sample, limits.tokens))
                continue
            generated, finish = _generate(key, options.reply, limit, stops)
            self.usage.completion_tokens += len(generated)
            self.samples.append(self._text(key, _cut(generated, stops), finish))
        self.longest = max(len(sample.deltas) for sample in self.samples)

    def _text(self, key: tuple[Any, ...], pieces: tuple[str, ...], finish: str) -> _ChatSample:
        values = _logprobs(key, len(pieces))
        entries = [_chat_logprob(piece, value, self.top) for piece, value in zip(pieces, values, strict=True)]
        deltas: list[dict[str, Any]] = [{"role": "assistant", "content": pieces[0] if pieces else ""}]
        deltas += [{"content": piece} for piece in pieces[1:]]
        logprobs: list[dict[str, Any] | None] = [None] * len(deltas)
        if self.top is not None:
            logprobs = [{"content": [entry], "refusal": None} for entry in entries] or [None]
        deltas.append({})
        logprobs.append(None)
        message = {"role": "assistant", "content": "".join(pieces), "refusal": None}
        content = entries if self.top is not None else None
        return _ChatSample(tuple(deltas), tuple(logprobs), finish, message, content)

    def _call(self, key: tuple[Any, ...], function: dict[str, Any], sample: int, limit: int) -> _ChatSample:
        name = str(function.get("name"))
        arguments = orjson.dumps(_arguments(function.get("parameters"), _rng(key, "arguments"))).decode()
        call_id = "call_" + hashlib.sha256(repr((key, name, sample)).encode()).hexdigest()[:24]
        pieces = _tokens(arguments)
        self.usage.completion_tokens += len(pieces) + 1  # the name, and the arguments
        if self.usage.prompt_tokens + self.usage.completion_tokens > limit:  # n calls to a function of a large schema
            raise _calls_too_large("n" if sample else "tools", limit)
        opening = {"index": 0, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
        deltas: list[dict[str, Any]] = [{"role": "assistant", "content": None, "tool_calls": [opening]}]
        deltas += [{"tool_calls": [{"index": 0, "function": {"arguments": piece}}]} for piece in pieces]
        deltas.append({})
        call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
        message = {"role": "assistant", "content": None, "refusal": None, "tool_calls": [call]}
        return _ChatSample(tuple(deltas), (None,) * len(deltas), "tool_calls", message, None)

    def active(self, step: int) -> Iterator[int]:
        for index, sample in enumerate(self.samples):
            if step < len(sample.deltas):
                yield index

    def chunk(self, index: int, step: int) -> dict[str, Any]:
        sample = self.samples[index]
        last = step == len(sample.deltas) - 1
        choice = {
            "index": index,
            "delta": sample.deltas[step],
            "logprobs": sample.logprobs[step],
            "finish_reason": sample.finish_reason if last else None,
        }
        return {**self._envelope("chat.completion.chunk"), "choices": [choice]}

    def usage_chunk(self) -> dict[str, Any]:
        return {**self._envelope("chat.completion.chunk"), "choices": [], "usage": self.usage.as_dict()}

    def body(self) -> dict[str, Any]:
        choices = [
            {
                "index": index,
                "message": sample.message,
                "logprobs": None if sample.content_logprobs is None else {"content": sample.content_logprobs},
                "finish_reason": sample.finish_reason,
            }
            for index, sample in enumerate(self.samples)
        ]
        return {**self._envelope("chat.completion"), "choices": choices, "usage": self.usage.as_dict()}

    def _envelope(self, kind: str) -> dict[str, Any]:
        return {"id": self.meta.id, "object": kind, "created": self.meta.created, "model": self.meta.model}


def _calls_too_large(param: str, limit: int) -> InvalidRequest:
    return InvalidRequest(
        f"This request's tool calls would take more than {limit} tokens, the most this deployment serves in one "
        f"request. Lower '{param}'.",
        param=param,
        code="request_too_large",
    )


def _chat_id() -> str:
    return "chatcmpl-" + new_completion_id().removeprefix("cmpl-")


def _message_texts(messages: Any) -> list[str]:
    """The text of every message (string contents and text parts, tool-call arguments), in order."""
    texts: list[str] = []
    for message in messages if isinstance(messages, list) else ():
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts += [str(part.get("text")) for part in content if isinstance(part, dict) and "text" in part]
        for call in (message.get("tool_calls") if isinstance(message, dict) else None) or ():
            texts.append(str((call.get("function") or {}).get("arguments", "")) if isinstance(call, dict) else "")
    return texts


def _called_function(body: dict[str, Any]) -> dict[str, Any] | None:
    """The function definition a tool call must be made to, or None to answer with text."""
    tools = [tool.get("function") for tool in body.get("tools") or () if isinstance(tool, dict)]
    functions = [function for function in tools if isinstance(function, dict)]
    choice = body.get("tool_choice")
    if not functions or choice in (None, "auto", "none"):
        return None
    if isinstance(choice, dict):
        wanted = (choice.get("function") or {}).get("name")
        return next((function for function in functions if function.get("name") == wanted), None)
    return functions[0]


def _arguments(schema: Any, rng: random.Random) -> dict[str, Any]:
    """A value for each property of a JSON Schema object, of its type (a string: a word)."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    values: dict[str, Any] = {}
    for name, spec in (properties or {}).items():
        kind = spec.get("type") if isinstance(spec, dict) else None
        enum = spec.get("enum") if isinstance(spec, dict) else None
        if isinstance(enum, list) and enum:
            values[name] = rng.choice(enum)
        elif kind == "integer":
            values[name] = rng.randint(0, 100)
        elif kind == "number":
            values[name] = round(rng.uniform(0, 100), 2)
        elif kind == "boolean":
            values[name] = rng.random() < 0.5
        else:
            values[name] = rng.choice(_VOCABULARY)
    return values


def _chat_logprob(piece: str, logprob: float, top: int | None) -> dict[str, Any]:
    alternatives = _alternatives(piece, logprob, top or 0) if top else {}
    return {
        "token": piece,
        "logprob": logprob,
        "bytes": list(piece.encode()),
        "top_logprobs": [{"token": t, "logprob": v, "bytes": list(t.encode())} for t, v in alternatives.items()],
    }


def _prompts(prompt: Any) -> list[tuple[str, ...]]:
    """Each prompt as the mock's tokens: words and punctuation of text, a word per token id."""
    if prompt is None:
        return [("<|endoftext|>",)]
    if isinstance(prompt, str):
        return [_tokens(prompt)]
    if prompt and all(isinstance(item, int) for item in prompt):
        return [_decode(prompt)]
    return [_tokens(item) if isinstance(item, str) else _decode(item) for item in prompt]


def _tokens(text: str) -> tuple[str, ...]:
    """Text as pieces that join back into it exactly: each word or mark with the spaces before it."""
    pieces: list[str] = []
    start = 0
    for match in _WORD.finditer(text):
        pieces.append(text[start : match.end()])
        start = match.end()
    if start < len(text):
        if pieces:
            pieces[-1] += text[start:]
        else:
            pieces.append(text[start:])
    return tuple(pieces)


def _decode(token_ids: list[int]) -> tuple[str, ...]:
    return tuple(" " + _VOCABULARY[token_id % len(_VOCABULARY)] for token_id in token_ids)


def _embeddings(
    inputs: list[str | list[int]], width: int, dimensions: int | None, model: str, encoding_format: Any
) -> CompletionResult:
    vectors = [embeddings.shortened(_embedding(item, width), dimensions) for item in inputs]
    tokens = sum(len(_tokens(item)) or 1 if isinstance(item, str) else len(item) for item in inputs)
    return embeddings.answer(vectors, model, tokens, encoding_format)


def _embedding(item: str | list[int], width: int) -> list[float]:
    """The same input, the same unit vector; a text and its token ids are different inputs."""
    rng = _rng((item if isinstance(item, str) else tuple(item),), "embedding")
    return embeddings.normalized([rng.gauss(0.0, 1.0) for _ in range(width)])


def _rng(key: tuple[Any, ...], purpose: str) -> random.Random:
    return random.Random(hashlib.sha256(repr((purpose, *key)).encode()).digest())  # noqa: S311


def _generate(
    key: tuple[Any, ...], reply: str | None, max_tokens: int | None, stops: list[str]
) -> tuple[tuple[str, ...], FinishReason]:
    """The tokens a sample produces before its natural end, max_tokens or a stop string."""
    if reply is not None:
        natural: tuple[str, ...] = _tokens(reply)
    else:
        rng = _rng(key, "text")
        words = [piece.strip() for piece in key[0] if piece.strip().isalnum()] or _VOCABULARY
        length = rng.randint(_MIN_LENGTH, _MAX_LENGTH)
        natural = tuple(" " + rng.choice(words if rng.random() < 0.3 else _VOCABULARY) for _ in range(length))
    limit = len(natural) if max_tokens is None else min(max_tokens, len(natural))
    longest_stop = max(map(len, stops), default=0)
    text = ""
    for count, piece in enumerate(natural[:limit], start=1):
        text += piece
        tail = text[-(len(piece) + longest_stop) :]  # only a stop this piece completes is new
        if any(stop in tail for stop in stops):
            return natural[:count], "stop"
    return natural[:limit], "stop" if limit == len(natural) and max_tokens != limit else "length"


def _cut(generated: tuple[str, ...], stops: list[str]) -> tuple[str, ...]:
    """The pieces a client sees: the text ends before the first stop string (which is not sent)."""
    text = "".join(generated)
    end = min((text.find(stop) for stop in stops if stop in text), default=len(text))
    pieces: list[str] = []
    for piece in generated:
        if end <= 0:
            break
        pieces.append(piece[:end])
        end -= len(piece)
    return tuple(piece for piece in pieces if piece)


def _logprobs(key: tuple[Any, ...], count: int) -> tuple[float, ...]:
    rng = _rng(key, "logprobs")
    return tuple(round(-rng.uniform(0.01, 2.5), 4) for _ in range(count))


def _alternatives(piece: str, logprob: float, k: int) -> dict[str, float]:
    """The sampled piece and k - 1 less likely words: a top_logprobs entry of k alternatives."""
    rng = random.Random(piece)  # noqa: S311
    top = {piece: logprob}
    for word in rng.sample(_VOCABULARY, min(k + 1, len(_VOCABULARY))):
        if len(top) >= max(k, 1):
            break
        top.setdefault(" " + word, round(logprob - rng.uniform(0.1, 3.0), 4))
    return top
