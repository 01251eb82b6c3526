"""One request's work as the engine sees it, and the way its events cross back to the event loop.

The worker thread hands each step's events to the requests' loop in one thread-safe call; the
loop marks a job cancelled (its client left, its deadline passed) and the worker drops its rows
at the next step. No torch here: the provider imports this module at request time.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
from collections.abc import AsyncIterator, Mapping

from providers.local.events import Event, JobEnd, JobFailed
from providers.local.request_plan import JobPlan


class Job:
    def __init__(self, plan: JobPlan, loop: asyncio.AbstractEventLoop) -> None:
        self.plan = plan
        self.cancelled = False
        self.random_seed = plan.params.seed if plan.params.seed is not None else secrets.randbits(63)
        self._loop = loop
        self._inbox: asyncio.Queue[list[Event]] = asyncio.Queue()
        # The worker's bookkeeping.
        self.next_prompt = 0  # prompts admitted to the batch so far
        self.unfinished = plan.sequences
        self.completion_tokens = 0
        self.prompt_tokens = sum(len(prompt) for prompt in plan.prompts)

    def cancel(self) -> None:
        self.cancelled = True

    async def batches(self) -> AsyncIterator[list[Event]]:
        """Each step's events until the job ends (the last batch holds the `JobEnd` or `JobFailed`)."""
        while True:
            events = await self._inbox.get()
            yield events
            if any(isinstance(event, JobEnd | JobFailed) for event in events):
                return


def deliver(outbox: Mapping[Job, list[Event]], wait_s: float = 0.0) -> None:
    """From the worker thread: queue each job's events of one step, one wake-up per event loop.
    With `wait_s`, wait (without the GIL) until every loop has taken them, at most that long."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[Job, list[Event]]]] = {}
    for job, events in outbox.items():
        if not job.cancelled:
            by_loop.setdefault(job._loop, []).append((job, events))
    taken = []
    for loop, batches in by_loop.items():
        done = threading.Event()
        try:
            loop.call_soon_threadsafe(_put, batches, done)
        except RuntimeError:  # the loop is closed: nobody is waiting any more
            for job, _ in batches:
                job.cancelled = True
            continue
        taken.append(done)
    if wait_s > 0:
        for done in taken:
            done.wait(wait_s)


def _put(batches: list[tuple[Job, list[Event]]], done: threading.Event) -> None:
    for job, events in batches:
        job._inbox.put_nowait(events)
    done.set()
