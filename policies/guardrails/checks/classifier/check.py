"""`classifier`: a Hugging Face sequence-classification model (a prompt-injection or jailbreak
classifier the operator downloads) judging each text, run by the transformers runtime of the local
engine (the ``local`` extra).

    input: [{check: classifier, model: ./models/prompt-guard, action: deny,
             labels: {INJECTION: hit, JAILBREAK: hit, BENIGN: pass}, threshold: 0.8}]

- **Verdict.** Each label of the model is ``hit`` or ``pass`` (``labels``; by default every label
  but the model's first, id 0, is a hit: ``SAFE``/``BENIGN``/``LEGIT`` come first in the usual
  classifiers). A text's score is the probability of its hit labels (summed for a softmax model,
  the largest for a multi-label one) in its worst window; the check hits at ``threshold``. The
  verdict names the most probable hit label, never the text.
- **Long texts** are read in windows of ``max_length`` tokens overlapping by ``stride``; at most
  ``max_windows`` per text: a longer one is an ``error`` verdict (``fail_open`` decides), never a
  silent pass of its unread end.
- **Off the event loop, batched, fair.** One worker thread per check loads the model on first use
  and runs every forward pass. A request's texts are submitted together; texts of concurrent
  requests that arrive while it works (or within ``max_wait_ms``) are classified together,
  ``max_batch`` windows per forward pass. Each job of the worker takes at most ``max_batch`` texts
  of each waiting request in turn (up to four times ``max_batch`` texts), so a request with thousands of
  texts shares the worker with the requests arriving after it instead of holding it until its last
  text. ``max_batch`` texts count as one call against the request's ``guardrails.max_calls``.
- **Failures** (the model cannot load, no answer for a request's texts within ``timeout_ms`` or
  before the request's guardrail deadline) are ``error`` verdicts; with ``fail_open: false``
  (default) they count as hits, as a webhook's do. Texts still waiting then are dropped from the
  queue.

torch and transformers are imported in the worker thread, never at start-up: a gateway without the
extra starts, and a config naming this check without it is refused with the install hint.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import json
import time
import weakref
from collections import deque
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from policies.guardrails.base import CheckConfig, Finding, RequestFacts
from policies.guardrails.bounds import DEADLINE_PASSED
from policies.guardrails.verdict import Stage

INSTALL_HINT = "pip install 'llm-gateway[local]'"
RETRY_LOAD_S = 30.0  # after a failed load, texts get an error verdict this long before the next try


class ClassifierConfig(CheckConfig):
    actions: ClassVar[frozenset[str]] = frozenset({"deny", "flag"})

    check: Literal["classifier"]
    model: str = Field(min_length=1)  # a local folder: config.json, weights, tokenizer (save_pretrained layout)
    labels: dict[str, Literal["hit", "pass"]] = Field(default_factory=dict)  # unnamed labels pass
    # A text whose attack probability reaches this is a hit.
    threshold: float = Field(default=0.5, gt=0.0, le=1.0)
    max_length: int = Field(default=512, ge=16, le=8192)  # tokens per window (capped at the model's positions)
    stride: int = Field(default=64, ge=0, le=4096)  # tokens shared by consecutive windows
    # Long texts are judged in windows of the model's length; at most this many.
    max_windows: int = Field(default=16, ge=1, le=4096)
    max_batch: int = Field(default=32, ge=1, le=1024)  # windows per forward pass
    max_wait_ms: float = Field(default=0.0, ge=0.0, le=1000.0)  # extra wait to gather a batch
    # A verdict not ready this long after it was asked for follows fail_open.
    timeout_ms: float = Field(default=30_000.0, gt=0.0, le=600_000.0)
    # true: a failed or late check lets the text through; false: the request is refused.
    fail_open: bool = False
    # Where the model runs: cpu, cuda, or auto.
    device: str = Field(default="auto", pattern=r"^(auto|cpu|cuda(:\d+)?|mps)$")
    # The model's number format: float32, float16 or bfloat16.
    dtype: Literal["auto", "float32", "float16", "bfloat16"] = "auto"

    @model_validator(mode="after")
    def _usable(self) -> ClassifierConfig:
        missing = [name for name in ("torch", "transformers") if importlib.util.find_spec(name) is None]
        if missing:
            raise ValueError(f"the classifier check needs {' and '.join(missing)}: {INSTALL_HINT}")
        names = model_labels(self.model)
        unknown = sorted(set(self.labels) - set(names))
        if unknown:
            raise ValueError(f"labels {unknown} are not the model's; its labels: {', '.join(names)}")
        if not hit_labels(names, self.labels):
            raise ValueError("no label of the model is a hit: map at least one to 'hit' in `labels`")
        return self

    def build(self) -> ClassifierCheck:
        return ClassifierCheck(self)


def model_labels(folder: str) -> list[str]:
    """The model's labels by id, read from its config.json (no torch needed)."""
    path = Path(folder)
    if not path.is_dir():
        raise ValueError(f"classifier model {folder!r} is not a folder (download the model first)")
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"classifier model {folder!r} has no readable config.json ({type(exc).__name__})") from exc
    id2label = config.get("id2label") or {}
    if not isinstance(id2label, dict) or not id2label:
        count = int(config.get("num_labels", 2))
        return [f"LABEL_{i}" for i in range(count)]
    return [str(id2label[key]) for key in sorted(id2label, key=int)]


def hit_labels(names: list[str], mapping: Mapping[str, str]) -> frozenset[int]:
    if mapping:
        return frozenset(i for i, name in enumerate(names) if mapping.get(name) == "hit")
    return frozenset(range(1, len(names)))


@dataclass(slots=True)
class BatchStats:
    """What the worker did: forward calls (one per batch of texts), texts, the largest batch."""

    batches: int = 0
    texts: int = 0
    largest: int = 0
    sizes: list[int] = field(default_factory=list)  # the last 64 batch sizes

    def record(self, size: int) -> None:
        self.batches += 1
        self.texts += size
        self.largest = max(self.largest, size)
        self.sizes = [*self.sizes[-63:], size]


class _Failure(Exception):
    """Classification did not happen: the message is the verdict's reason."""


class ClassifierCheck:
    is_async = True
    needs_text = True

    def __init__(self, config: ClassifierConfig) -> None:
        self.config = config
        self.names = model_labels(config.model)
        self._hits = hit_labels(self.names, config.labels)
        self.stats = BatchStats()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="guardrail-classifier")
        self._runtime: Any = None
        self._failed_at: float | None = None
        self._failure = ""
        self._queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Queue] = weakref.WeakKeyDictionary()
        self.texts_per_call = config.max_batch
        weakref.finalize(self, self._executor.shutdown, wait=False)

    def evaluate(self, text: str, facts: RequestFacts, stage: Stage, index: int) -> Finding:
        raise TypeError("the classifier check is asynchronous: call evaluate_async")

    async def evaluate_async(self, text: str, facts: RequestFacts, stage: Stage, index: int) -> Finding:
        return (await self.evaluate_batch([text], facts, stage, [index], None))[0]

    async def evaluate_batch(
        self, texts: Sequence[str], facts: RequestFacts, stage: Stage, indexes: Sequence[int], deadline: float | None
    ) -> list[Finding]:
        """The texts submitted together; those unanswered within `timeout_ms` or by `deadline` (event-loop
        time) get the failure verdict and leave the queue."""
        if not texts:
            return []
        loop = asyncio.get_running_loop()
        queue = self._queues.get(loop)
        if queue is None:
            queue = self._queues[loop] = _Queue(self, loop)
        futures = queue.submit(texts)
        own = loop.time() + self.config.timeout_ms / 1000
        late = f"classifier gave no answer within {self.config.timeout_ms:g} ms"
        if deadline is not None and deadline < own:
            own, late = deadline, DEADLINE_PASSED
        try:
            async with asyncio.timeout_at(own):
                await asyncio.wait(futures)
        except TimeoutError:
            pass
        finally:  # timed out, or the request is gone: the worker skips what is left
            for future in futures:
                future.cancel()
        found: list[Finding] = []
        for future in futures:
            if future.cancelled():
                found.append(self.failure(late))
            elif (error := future.exception()) is not None:
                found.append(self.failure(str(error)))
            else:
                found.append(self._judge(future.result()))
        return found

    async def aclose(self) -> None:
        await asyncio.to_thread(self._executor.shutdown, wait=True)

    def _judge(self, scored: Any) -> Finding:
        if scored.too_long:
            return self.failure(f"text longer than max_windows ({self.config.max_windows}) windows of the model")
        best, label = 0.0, ""
        for probs in scored.windows:
            hits = [(probs[i], i) for i in self._hits if i < len(probs)]
            if not hits:
                continue
            score = max(p for p, _ in hits) if self._runtime.multi_label else sum(p for p, _ in hits)
            if score >= best:
                best, label = score, self.names[max(hits)[1]]
        if best < self.config.threshold:
            return Finding(hit=False, score=best)
        reason = f"classifier score {best:.2f} >= {self.config.threshold:.2f} ({label})"
        return Finding(hit=True, reason=reason, score=best, labels=(label,))

    def failure(self, reason: str) -> Finding:
        mode = "failing open" if self.config.fail_open else "failing closed"
        return Finding(hit=not self.config.fail_open, reason=f"{reason}; {mode}", status="error")

    def classify_batch(self, texts: list[str]) -> list[Any]:
        """In the worker thread: load the model on first use, then score `texts` together."""
        if self._runtime is None:
            if self._failed_at is not None and time.monotonic() - self._failed_at < RETRY_LOAD_S:
                raise _Failure(self._failure)
            try:
                module = importlib.import_module("policies.guardrails.checks.classifier.model")
                config = self.config
                self._runtime = module.Runtime(
                    config.model,
                    device=config.device,
                    dtype=config.dtype,
                    max_length=config.max_length,
                    stride=config.stride,
                    max_windows=config.max_windows,
                    max_batch=config.max_batch,
                )
            except Exception as exc:  # any loading failure is a verdict, not a crash
                self._failed_at = time.monotonic()
                self._failure = f"classifier model could not load ({type(exc).__name__})"
                raise _Failure(self._failure) from None
        self.stats.record(len(texts))
        result: list[Any] = self._runtime.classify(texts)
        return result


class _Queue:
    """One event loop's texts waiting for the worker, by request: whoever finds it idle starts a drain
    task, which sends the worker one job each time it is free, taking up to `max_batch` texts of each
    waiting request in turn (a request with texts left goes to the back of the line)."""

    def __init__(self, check: ClassifierCheck, loop: asyncio.AbstractEventLoop) -> None:
        self._check = check
        self._loop = loop
        self._waiting: dict[int, deque[tuple[str, asyncio.Future[Any]]]] = {}
        self._submitted = 0
        self._task: asyncio.Task[None] | None = None

    def submit(self, texts: Sequence[str]) -> list[asyncio.Future[Any]]:
        futures: list[asyncio.Future[Any]] = []
        for _ in texts:
            future: asyncio.Future[Any] = self._loop.create_future()
            future.add_done_callback(_retrieve)  # a waiter that timed out leaves no "exception never retrieved"
            futures.append(future)
        if futures:
            self._submitted += 1
            self._waiting[self._submitted] = deque(zip(texts, futures, strict=True))
            if self._task is None:
                self._task = self._loop.create_task(self._drain())
        return futures

    def _take(self) -> list[tuple[str, asyncio.Future[Any]]]:
        """The next job: up to `max_batch` texts of each waiting request in turn, four times `max_batch` at most
        (the runtime splits their windows into forward passes)."""
        share = self._check.config.max_batch
        size = 4 * share
        batch: list[tuple[str, asyncio.Future[Any]]] = []
        while self._waiting and len(batch) < size:
            for owner in list(self._waiting):
                texts = self._waiting.pop(owner)
                taken = 0
                while texts and taken < share and len(batch) < size:
                    text, future = texts.popleft()
                    if not future.done():  # not given up by its request
                        batch.append((text, future))
                        taken += 1
                if texts:
                    self._waiting[owner] = texts  # to the back of the line
                if len(batch) >= size:
                    break
        return batch

    async def _drain(self) -> None:
        check = self._check
        try:
            await asyncio.sleep(check.config.max_wait_ms / 1000)  # at least one turn: this tick's texts join
            while self._waiting:
                batch = self._take()
                if not batch:
                    continue
                try:
                    results = await self._loop.run_in_executor(
                        check._executor, check.classify_batch, [text for text, _ in batch]
                    )
                except Exception as exc:
                    name = type(exc).__name__
                    failure = exc if isinstance(exc, _Failure) else _Failure(f"classifier failed ({name})")
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(failure)
                    continue
                for (_, future), scored in zip(batch, results, strict=True):
                    if not future.done():
                        future.set_result(scored)
        finally:
            self._task = None
            for texts in self._waiting.values():  # only if the drain itself was cancelled
                for _, future in texts:
                    if not future.done():
                        future.cancel()
            self._waiting.clear()


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()
