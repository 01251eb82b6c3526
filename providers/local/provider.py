"""`type: local`: the Provider interface over the in-process engine.

Requests are checked on the event loop (a 400 for what can be refused cheaply), tokenised off it
when their prompts are large, queued to the engine's worker thread, and their events relayed as
they come. Engine failures translate here: a full queue is a 429 with Retry-After, a model that
could not load or a failed step a 502, a deadline a 504. The deployment's `timeout_s` bounds the
whole request from its arrival, a stream's last chunk included.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson

from gateway.api.errors import GatewayError, UpstreamError, UpstreamRejected, UpstreamTimeout
from providers.base import TEXT_APIS, Api, CompletionResult, UpstreamRequest
from providers.chat.shape import chat_meta, chat_usage_chunk_body
from providers.completion_shape import ChunkMeta, Usage, usage_chunk_body
from providers.local.chat import check_chat
from providers.local.engine import Engine, EngineClosed, QueueFull
from providers.local.events import Delta, JobEnd, JobFailed
from providers.local.jobs import Job
from providers.local.loader import LoadedModel
from providers.local.options import LocalOptions
from providers.local.output import Collected, stream_chunk, whole_answer
from providers.local.request_plan import JobPlan, check_request, tokenise
from providers.request_bounds import RequestLimits, chat_names

log = logging.getLogger(__name__)
_JOIN_TIMEOUT_S = 10.0
# Prompts of at most this many characters and token ids together are tokenised on the event loop
# (microseconds: a thread hop would cost more); larger ones in the deployment's tokenising thread.
INLINE_WORK = 1024


class LocalProvider:
    apis: frozenset[Api] = TEXT_APIS  # chat through the model's chat template

    def __init__(self, deployment: str, options: LocalOptions) -> None:
        self._deployment = deployment
        self._options = options
        self._limits = RequestLimits.of(options)
        # One thread: a large request's tokenising never holds the event loop, and the tokenizer is
        # never called from two tokenising threads at once.
        self._tokeniser = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"local-tokenise:{deployment}")
        self.engine = Engine(options, deployment)

    async def complete(self, request: UpstreamRequest) -> CompletionResult:
        deadline = asyncio.get_running_loop().time() + request.timeout_s
        job: Job | None = None
        sequences: dict[int, Collected] = {}
        end: JobEnd | None = None
        try:
            async with asyncio.timeout_at(deadline):
                model = await self._loaded()
                plan = await self._plan(request, model)
                job = self._submit(plan)
                async for events in job.batches():
                    for event in events:
                        if isinstance(event, Delta):
                            sequences.setdefault(event.sequence, Collected()).add(event)
                        else:
                            end = self._ended(event)
        except TimeoutError:
            raise self._timeout(request.timeout_s) from None
        finally:
            if job is not None:
                job.cancel()  # no-op once finished; otherwise its rows leave the batch at the next step
        assert end is not None  # the job's events end with its JobEnd (or raise on JobFailed)
        body = whole_answer(plan, sequences, end, model.fingerprint)
        return CompletionResult(raw=orjson.dumps(body), body=body)

    async def stream(self, request: UpstreamRequest) -> LocalStream:
        deadline = asyncio.get_running_loop().time() + request.timeout_s
        try:
            async with asyncio.timeout_at(deadline):
                model = await self._loaded()
                plan = await self._plan(request, model)
        except TimeoutError:
            raise self._timeout(request.timeout_s) from None
        job = self._submit(plan)
        return LocalStream(self, job, plan, request.timeout_s, deadline)

    async def prompt_decoder(self) -> Callable[[list[int]], str] | None:
        """The tokenizer's decode, for input guardrails on a prompt given as token ids."""
        try:
            model = await self._loaded()
        except UpstreamError:
            return None  # the checks record `skipped`; the request itself then fails with the 503
        decode: Callable[[list[int]], str] = model.tokenizer.decode
        return decode

    async def aclose(self) -> None:
        self.engine.stop()
        self._tokeniser.shutdown(wait=False, cancel_futures=True)
        await asyncio.to_thread(self.engine.join, _JOIN_TIMEOUT_S)

    async def count_prompt_tokens(self, body: dict[str, Any]) -> int:
        """The prompt tokens a chat request's conversation is, by the model's tokenizer and chat
        template (what its answer's usage would say); nothing is generated."""
        model = await self._loaded()
        plan = await self._plan(UpstreamRequest(body, "count", 0.0, "chat"), model)
        return sum(len(prompt) for prompt in plan.prompts)

    async def _loaded(self) -> LoadedModel:
        ready = self.engine.ready
        try:
            if ready.done():
                return ready.result()
            # shield: a request that gives up must not cancel the load every request waits for
            return await asyncio.shield(asyncio.wrap_future(ready))
        except Exception as exc:
            raise UpstreamError(
                f"The local model of deployment '{self._deployment}' could not be loaded: {exc}",
                code="local_model_unavailable",
                upstream_status=503,
            ) from None

    async def _plan(self, request: UpstreamRequest, model: LoadedModel) -> JobPlan:
        """The request's plan: refused early when its size alone says it cannot be served, tokenised
        off the event loop when its prompts are large."""
        options = self._options
        check = check_chat if request.api == "chat" else check_request
        draft = check(request.body, model, deployment=self._deployment, drop=options.drop_params, limits=self._limits)
        with chat_names(request.api):
            if draft.work <= INLINE_WORK:
                return tokenise(draft, model, self._limits)
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self._tokeniser, tokenise, draft, model, self._limits)

    def _submit(self, plan: JobPlan) -> Job:
        job = Job(plan, asyncio.get_running_loop())
        try:
            self.engine.submit(job)
        except QueueFull:
            wait = self._options.retry_after_s
            raise UpstreamRejected(
                f"The local engine of deployment '{self._deployment}' is at capacity "
                f"(at most {self._options.max_queue} sequences may wait for a batch slot). Retry after {wait}s.",
                status=429,
                type="rate_limit_error",
                code="engine_overloaded",
                headers={"retry-after": str(wait)},
                upstream_status=429,
            ) from None
        except EngineClosed:
            raise self._failure("the deployment was closed") from None
        return job

    def _ended(self, event: JobEnd | JobFailed) -> JobEnd:
        if isinstance(event, JobFailed):
            raise self._failure(event.message)
        return event

    def _failure(self, message: str) -> GatewayError:
        log.warning("local deployment %s: %s", self._deployment, message)
        return UpstreamError(
            f"The local engine of deployment '{self._deployment}' failed: {message}", upstream_status=500
        )

    def _timeout(self, timeout_s: float) -> UpstreamTimeout:
        return UpstreamTimeout(
            f"The local engine of deployment '{self._deployment}' did not finish the completion within {timeout_s:g}s."
        )


class LocalStream:
    """One request's chunks, a step's worth per item, ending with the usage chunk when asked; or, past
    the request's deadline (its arrival + `timeout_s`), with a 504 error."""

    def __init__(self, provider: LocalProvider, job: Job, plan: JobPlan, timeout_s: float, deadline: float) -> None:
        self._provider = provider
        self._job = job
        self._plan = plan
        self._timeout_s = timeout_s
        self._deadline = deadline  # on the event loop's clock
        self._meta = chat_meta(plan.model) if plan.api == "chat" else ChunkMeta(plan.model)
        self._started: set[int] = set()  # chat choices whose first chunk (with the role) left
        self._usage: Usage | None = None  # once the job ended: what its plain answer reports

    async def __aiter__(self) -> AsyncIterator[list[bytes]]:
        batches = aiter(self._job.batches())
        while True:
            try:
                async with asyncio.timeout_at(self._deadline):
                    events = await anext(batches, None)
            except TimeoutError:
                self._job.cancel()  # its rows leave the batch at the next step
                raise self._provider._timeout(self._timeout_s) from None
            if events is None:
                return
            payloads = []
            for event in events:
                if isinstance(event, Delta):
                    chunk = stream_chunk(self._meta, event, self._plan, event.sequence not in self._started)
                    if chunk is not None:
                        self._started.add(event.sequence)
                        payloads.append(orjson.dumps(chunk))
                    continue
                end = self._provider._ended(event)
                self._usage = Usage(end.prompt_tokens, end.completion_tokens)
                if self._plan.include_usage:
                    usage_chunk = chat_usage_chunk_body if self._plan.api == "chat" else usage_chunk_body
                    payloads.append(orjson.dumps(usage_chunk(self._meta, self._usage)))
            if payloads:
                yield payloads

    def reported_usage(self) -> dict[str, int] | None:
        """The stream's `usage`, the plain answer's figures, once it ended (None before, or when cut
        short), whether or not the client asked for a usage chunk. Its events are text pieces, not
        tokens (a token that completes no character, or that a stop string holds back, sends none; one
        that releases held text sends several tokens' text): counting one token per event is wrong
        here, so whoever meters the stream should take these figures."""
        return None if self._usage is None else self._usage.as_dict()

    async def aclose(self) -> None:
        self._job.cancel()
