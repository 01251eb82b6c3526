"""The local engine serving an encoder folder (`type: local` on a sentence-transformers folder): the
Embeddings API in-process.

Each request is checked before any work (inputs per request, tokens per request, every input within
the context: a 400 naming it), tokenised off the event loop, and its inputs join one queue shared by
every caller. One worker thread drains it: everything waiting is sorted by length and cut into
batches of `max_batch`, each padded to its own longest, so short texts never pay for a long one and
many small requests fill a batch together. `max_queue` bounds the inputs waiting (a 429 with
`Retry-After` beyond it; one request larger than the queue is taken when nothing waits).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from gateway.api.embeddings import inputs_of
from gateway.api.errors import InvalidRequest, UpstreamError, UpstreamRejected, UpstreamTimeout
from providers import embeddings
from providers.base import Api, CompletionResult, UpstreamRequest
from providers.local.encoder.model import LoadedEncoder, load_encoder
from providers.local.options import LocalOptions

_INLINE_CHARS = 4096  # requests with more text are tokenised in the tokenising thread


@dataclass(slots=True)
class _Item:
    ids: list[int]
    future: asyncio.Future[list[float]] = field(repr=False)


class LocalEncoderProvider:
    apis: frozenset[Api] = frozenset(("embeddings",))

    def __init__(self, deployment: str, options: LocalOptions) -> None:
        self._deployment = deployment
        self._options = options
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"local-encoder:{deployment}")
        self._tokeniser = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"local-tokenise:{deployment}")
        self._ready = self._worker.submit(load_encoder, options)  # loads at start-up, in the worker
        self._waiting: list[_Item] = []
        self._draining: asyncio.Task[None] | None = None

    async def complete(self, request: UpstreamRequest) -> CompletionResult:
        if request.api != "embeddings":  # routing keeps other APIs away (`apis`)
            raise InvalidRequest(f"Deployment '{self._deployment}' serves only /v1/embeddings.", param="model")
        try:
            async with asyncio.timeout(request.timeout_s):
                return await self._embed(request.body)
        except TimeoutError:
            raise UpstreamTimeout(
                f"The local encoder of deployment '{self._deployment}' did not answer within {request.timeout_s:g} s."
            ) from None

    async def stream(self, request: UpstreamRequest) -> Any:
        raise InvalidRequest("Embeddings are not streamed.", param="stream")

    async def prompt_decoder(self) -> Callable[[list[int]], str] | None:
        """The tokenizer's decode, for input guardrails on inputs given as token ids."""
        try:
            model = await self._loaded()
        except UpstreamError:
            return None
        decode: Callable[[list[int]], str] = model.tokenizer.decode
        return decode

    async def aclose(self) -> None:
        self._worker.shutdown(wait=False, cancel_futures=True)
        self._tokeniser.shutdown(wait=False, cancel_futures=True)

    async def _embed(self, body: dict[str, Any]) -> CompletionResult:
        model = await self._loaded()
        dimensions = embeddings.check_dimensions(
            body, model.width, shortens=self._options.embedding_shortening, deployment=self._deployment
        )
        inputs = inputs_of(body.get("input"))
        self._check_count(len(inputs))
        if sum(len(item) for item in inputs if isinstance(item, str)) <= _INLINE_CHARS:
            sequences = self._tokenise(model, inputs)
        else:
            loop = asyncio.get_running_loop()
            sequences = await loop.run_in_executor(self._tokeniser, self._tokenise, model, inputs)
        vectors = await self._submit(sequences)
        vectors = [embeddings.shortened(vector, dimensions) for vector in vectors]
        tokens = sum(len(ids) for ids in sequences)
        return embeddings.answer(vectors, str(body.get("model") or ""), tokens, body.get("encoding_format"))

    def _check_count(self, count: int) -> None:
        limit = self._options.max_sequences_per_request
        if count > limit:
            raise InvalidRequest(
                f"This request has {count} inputs; deployment '{self._deployment}' embeds at most {limit} "
                "per request (max_sequences_per_request). Split the request.",
                param="input",
                code="request_too_large",
            )

    def _tokenise(self, model: LoadedEncoder, inputs: list[str | list[int]]) -> list[list[int]]:
        """Each input as the model reads it; a 400 naming the first input past the context or the vocabulary."""
        sequences: list[list[int]] = []
        total = 0
        for position, item in enumerate(inputs):
            param = "input" if len(inputs) == 1 else f"input[{position}]"
            if isinstance(item, str):
                ids = model.encode_text(item)
            else:
                beyond = next((token for token in item if token >= model.vocab_size), None)
                if beyond is not None:
                    raise InvalidRequest(
                        f"Invalid '{param}': token id {beyond} is past the model's vocabulary "
                        f"({model.vocab_size} tokens).",
                        param=param,
                        code="invalid_value",
                    )
                ids = model.with_special_tokens(item)
            if len(ids) > model.context_length:
                raise InvalidRequest(
                    f"Invalid '{param}': it is {len(ids)} tokens, more than the {model.context_length} the model "
                    f"of deployment '{self._deployment}' reads. Shorten or split it.",
                    param=param,
                    code="context_length_exceeded",
                )
            total += len(ids)
            if total > self._options.max_tokens_per_request:
                raise InvalidRequest(
                    f"This request has more than {self._options.max_tokens_per_request} tokens, the most "
                    f"deployment '{self._deployment}' embeds in one request (max_tokens_per_request). "
                    "Split the request.",
                    param="input",
                    code="request_too_large",
                )
            sequences.append(ids)
        return sequences

    async def _submit(self, sequences: list[list[int]]) -> list[list[float]]:
        waiting = len(self._waiting)
        if waiting and waiting + len(sequences) > self._options.max_queue:
            wait = self._options.retry_after_s
            raise UpstreamRejected(
                f"The local encoder of deployment '{self._deployment}' is at capacity (at most "
                f"{self._options.max_queue} inputs may wait for a batch). Retry after {wait}s.",
                status=429,
                type="rate_limit_error",
                code="engine_overloaded",
                headers={"retry-after": str(wait)},
                upstream_status=429,
            )
        loop = asyncio.get_running_loop()
        items = [_Item(ids, loop.create_future()) for ids in sequences]
        self._waiting += items
        if self._draining is None or self._draining.done():
            self._draining = asyncio.create_task(self._drain())
        try:
            return list(await asyncio.gather(*(item.future for item in items)))
        finally:
            for item in items:
                item.future.cancel()  # no-op once answered; a request that left frees its rows

    async def _drain(self) -> None:
        """Batch everything waiting (sorted by length, padded per batch) until nothing waits."""
        model = await self._loaded()
        loop = asyncio.get_running_loop()
        batch_size = self._options.max_batch
        while self._waiting:
            taken = sorted((item for item in self._waiting if not item.future.done()), key=lambda i: len(i.ids))
            self._waiting = []
            for start in range(0, len(taken), batch_size):
                batch = [item for item in taken[start : start + batch_size] if not item.future.done()]
                if not batch:
                    continue
                try:
                    vectors = await loop.run_in_executor(self._worker, model.embed, [item.ids for item in batch])
                except Exception as exc:  # the engine failed: every caller of the batch gets a 500-class error
                    failure = UpstreamError(
                        f"The local encoder of deployment '{self._deployment}' failed: {type(exc).__name__}",
                        code="local_engine_error",
                        upstream_status=500,
                    )
                    for item in batch:
                        if not item.future.done():
                            item.future.set_exception(failure)
                    continue
                for item, vector in zip(batch, vectors, strict=True):
                    if not item.future.done():
                        item.future.set_result(vector)

    async def _loaded(self) -> LoadedEncoder:
        try:
            if self._ready.done():
                return self._ready.result()
            return await asyncio.shield(asyncio.wrap_future(self._ready))
        except Exception as exc:
            raise UpstreamError(
                f"The local encoder of deployment '{self._deployment}' could not be loaded: {exc}",
                code="local_model_unavailable",
                upstream_status=503,
            ) from None
