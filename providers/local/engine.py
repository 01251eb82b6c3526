"""The batching engine: one worker thread that owns the model and decodes every request together.

Continuous batching: between two decoding steps the worker drops the sequences that finished (or
whose client left), prefills the requests that arrived (each prompt once, its `best_of` samples
sharing that prefill) and adds them to the batch; then one forward pass advances every sequence
by one token. A request that arrives mid-generation waits at most one step before its prefill.

Admission is fair between requests: free rows go round-robin, one prompt's group at a time, to the
requests that wait, so a small request waits for the next free rows, not for every prompt of a
large one before it. The queue is bounded in sequences (`max_queue`): a request that would pass it
is refused at once (the provider answers 429).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from concurrent.futures import Future

import torch

from providers.local.batch_cache import BatchCache
from providers.local.events import Delta, Event, JobEnd, JobFailed, TokenInfo
from providers.local.forward import decode_step, echo_of, prefill
from providers.local.jobs import Job, deliver
from providers.local.loader import LoadedModel, load
from providers.local.options import LocalOptions
from providers.local.sampling import bias_vector, choose, new_generator, penalty_counts
from providers.local.sequence import Sequence
from providers.local.text.detokenizer import IncrementalDetokenizer, token_text

log = logging.getLogger(__name__)
# How long the worker waits, after handing a step's events over, for the event loop to take them.
# Going straight on, the woken loop thread competes for the GIL with a worker that drops and retakes
# it around every torch call (CPython forces a hand-over only after a 5 ms switch interval): with 7
# rows on the tiny model, events reached the loop in 0.2 ms (median) that way, 0.06 ms with the wait.
# Bounded, so that a busy loop slows decoding by little.
_HAND_OVER_S = 0.002


class QueueFull(Exception):
    """More sequences would wait for a batch slot than the deployment's `max_queue`."""


class EngineClosed(Exception):
    """The deployment was closed (shutdown or reload) while the request was waiting."""


class Engine:
    def __init__(self, options: LocalOptions, name: str) -> None:
        self.ready: Future[LoadedModel] = Future()  # the loaded model, or why it could not load
        self._options = options
        self._condition = threading.Condition()
        self._waiting: deque[Job] = deque()  # in round-robin order: the next to admit a group first
        self._queued = 0  # sequences of the waiting jobs not yet admitted
        self._stopping = False
        self._rows: list[Sequence] = []  # in the batch cache's row order
        self._batch: BatchCache | None = None  # once the model is loaded
        self._outbox: dict[Job, list[Event]] = {}
        self._token_texts: dict[int, str] = {}
        self._model: LoadedModel | None = None
        self.steps = 0  # decoding steps run: for benchmarks and tests
        self._thread = threading.Thread(target=self._main, name=f"local-engine:{name}", daemon=True)
        self._thread.start()

    def submit(self, job: Job) -> None:
        with self._condition:
            if self._stopping:
                raise EngineClosed
            if self._queued and self._queued + job.plan.sequences > self._options.max_queue:
                self._forget_cancelled()
                if self._queued and self._queued + job.plan.sequences > self._options.max_queue:
                    raise QueueFull
            self._waiting.append(job)
            self._queued += job.plan.sequences
            self._condition.notify()

    def stop(self) -> None:
        with self._condition:
            self._stopping = True
            self._condition.notify()

    def join(self, timeout_s: float) -> None:
        self._thread.join(timeout_s)

    @property
    def busy(self) -> tuple[int, int]:
        """(sequences in the batch, sequences waiting): a snapshot for tests and benchmarks."""
        return len(self._rows), self._queued

    def _main(self) -> None:
        try:
            self._model = load(self._options)
        except Exception as exc:  # handed to every request, which answers 503
            log.exception("local model %s could not be loaded", self._options.model)
            self.ready.set_exception(exc)
            self._fail_waiting(f"the model could not be loaded: {exc}")
            return
        self._batch = self._new_batch(self._model)
        self.ready.set_result(self._model)
        with torch.inference_mode():
            while self._next_round(self._model):
                pass
        self._fail_running(set(), "the deployment was closed")
        self._fail_waiting("the deployment was closed")
        self._model = None

    def _next_round(self, model: LoadedModel) -> bool:
        """Admit, prefill, step once; False once the engine is stopping."""
        admitted = self._wait_for_work()
        if admitted is None:
            return False
        try:
            for job, prompt in admitted:
                self._prefill(model, job, prompt)
            self._flush()  # echoes and ends of prefill-only requests
            self._drop_finished()
            if self._rows:
                assert self._batch is not None
                tokens, positions = [row.last_token for row in self._rows], [row.cached for row in self._rows]
                logits = decode_step(model.model, tokens, positions, self._batch, model.device)
                for row in self._rows:
                    row.cached += 1
                self._take(model, logits, self._rows)
                self.steps += 1
                self._drop_finished()
            self._flush()
        except Exception as exc:  # a failed step fails its requests; the engine keeps serving
            log.exception("local engine step failed")
            self._fail_running({job for job, _ in admitted}, f"the local engine failed: {exc}")
        return True

    def _wait_for_work(self) -> list[tuple[Job, int]] | None:
        with self._condition:
            while not (self._stopping or self._rows or self._waiting):
                self._condition.wait()
            if self._stopping:
                return None
            return self._admit()

    def _admit(self) -> list[tuple[Job, int]]:
        """(job, prompt) groups that fit in the free rows, round-robin between the waiting requests:
        one group of the first, then one of the next, …; a request whose group does not fit stays
        first in line, so that none is passed over for ever. A group larger than the whole batch
        runs when the batch is empty rather than never."""
        self._forget_cancelled()
        free = self._options.max_batch - len(self._rows)
        admitted: list[tuple[Job, int]] = []
        while self._waiting:
            job = self._waiting[0]
            samples = job.plan.samples
            if samples > free and (self._rows or admitted):
                break
            admitted.append((job, job.next_prompt))
            job.next_prompt += 1
            free -= samples
            self._queued -= samples
            self._waiting.popleft()
            if job.next_prompt < len(job.plan.prompts):
                self._waiting.append(job)  # its next group after one of every other request's
        return admitted

    def _forget_cancelled(self) -> None:
        """Drop the waiting requests whose client left (with the condition held)."""
        if any(job.cancelled for job in self._waiting):
            self._waiting = deque(job for job in self._waiting if not job.cancelled)
            self._queued = sum(_unadmitted(job) for job in self._waiting)

    def _prefill(self, model: LoadedModel, job: Job, prompt_index: int) -> None:
        params = job.plan.params
        prompt = job.plan.prompts[prompt_index]
        prompt_logprobs = params.echo and params.logprobs is not None
        result = None
        if params.max_tokens > 0 or prompt_logprobs:
            result = prefill(
                model.model,
                prompt,
                model.device,
                score_prompt=prompt_logprobs,
                top=params.logprobs,
                cache=params.max_tokens > 0,
            )
        echo_text, echo_infos = "", list[TokenInfo]()
        if params.echo:
            scores = result.scores if result is not None else None
            echo_text, echo_infos = echo_of(prompt, scores, model.tokenizer, self._token_text)
        first = prompt_index * job.plan.samples
        group = [
            self._sequence(model, job, first + sample, prompt, len(echo_text)) for sample in range(job.plan.samples)
        ]
        for sequence in group:
            if params.echo:
                self._emit(job, Delta(sequence.index, echo_text, list(echo_infos)))
            if params.max_tokens == 0:
                self._finished(sequence, sequence.finish_empty())
        if result is None or result.cache is None:
            return
        self._take(model, result.logits.expand(len(group), -1), group)
        self._flush()  # the first token leaves before the newcomer joins the batch
        live = [sequence for sequence in group if sequence.finish_reason is None]
        if live:
            assert self._batch is not None
            self._batch.join(result.cache, len(live))
            self._rows.extend(live)

    def _sequence(self, model: LoadedModel, job: Job, index: int, prompt: tuple[int, ...], echoed: int) -> Sequence:
        params = job.plan.params
        return Sequence(
            owner=job,
            index=index,
            prompt=prompt,
            params=params,
            detokenizer=IncrementalDetokenizer(model.tokenizer, prompt),
            token_text=self._token_text,
            text_base=echoed,
            generator=new_generator(job.random_seed, index),
            counts=penalty_counts(params, model.vocab_size, model.device),
            bias=bias_vector(params, model.vocab_size, model.device),
        )

    def _take(self, model: LoadedModel, logits: torch.Tensor, rows: list[Sequence]) -> None:
        """Sample each row's next token and hand on the text it releases."""
        choices = choose(logits, rows)
        for row, sequence in enumerate(rows):
            delta = sequence.accept(choices.tokens[row], choices.logprobs[row], choices.tops[row], model.stop_token_ids)
            if delta is None:
                continue
            if delta.finish_reason is None:
                self._emit(sequence.owner, delta)
            else:
                self._finished(sequence, delta)

    def _finished(self, sequence: Sequence, delta: Delta) -> None:
        job: Job = sequence.owner
        self._emit(job, delta)
        job.unfinished -= 1
        job.completion_tokens += sequence.generated
        if job.unfinished == 0:
            self._emit(job, JobEnd(job.prompt_tokens, job.completion_tokens))

    def _drop_finished(self) -> None:
        keep = [row for row, seq in enumerate(self._rows) if seq.finish_reason is None and not seq.owner.cancelled]
        if len(keep) != len(self._rows):
            assert self._batch is not None
            self._rows = [self._rows[row] for row in self._batch.keep(keep)]

    def _emit(self, job: Job, event: Event) -> None:
        self._outbox.setdefault(job, []).append(event)

    def _flush(self) -> None:
        outbox, self._outbox = self._outbox, {}
        deliver(outbox, wait_s=_HAND_OVER_S)

    def _token_text(self, token: int) -> str:
        text = self._token_texts.get(token)
        if text is None:
            assert self._model is not None
            text = self._token_texts[token] = token_text(self._model.tokenizer, token)
        return text

    def _new_batch(self, model: LoadedModel) -> BatchCache:
        return BatchCache(rows=self._options.max_batch, context=model.context_length)

    def _fail_running(self, admitted: set[Job], message: str) -> None:
        jobs = admitted | {sequence.owner for sequence in self._rows}
        self._rows, self._outbox = [], {}
        self._batch = self._new_batch(self._model) if self._model is not None else None
        with self._condition:  # a job only partly admitted must not be admitted further
            self._waiting = deque(job for job in self._waiting if job not in jobs)
            self._queued = sum(_unadmitted(job) for job in self._waiting)
        deliver({job: [JobFailed(message)] for job in jobs})

    def _fail_waiting(self, message: str) -> None:
        with self._condition:
            self._stopping = True
            waiting, self._waiting = list(self._waiting), deque()
            self._queued = 0
        deliver({job: [JobFailed(message)] for job in waiting})


def _unadmitted(job: Job) -> int:
    return (len(job.plan.prompts) - job.next_prompt) * job.plan.samples
