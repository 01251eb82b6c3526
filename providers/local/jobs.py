"""One request's work as the engine sees it, and the way its events cross back to the event loop.

The worker thread hands each step's events to the request's loop in one thread-safe call; the
loop marks a job cancelled (its client left, its deadline passed) and the worker drops its rows
at the next step. No torch here: the provider imports this module at request time.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator

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

    def deliver(self, events: list[Event]) -> None:
        """From the worker thread: queue one step's events for the request's loop."""
        if self.cancelled:
            return
        try:
            self._loop.call_soon_threadsafe(self._inbox.put_nowait, events)
        except RuntimeError:  # the loop is closed: nobody is waiting any more
            self.cancelled = True

    def cancel(self) -> None:
        self.cancelled = True

    async def batches(self) -> AsyncIterator[list[Event]]:
        """Each step's events until the job ends (the last batch holds the `JobEnd` or `JobFailed`)."""
        while True:
            events = await self._inbox.get()
            yield events
            if any(isinstance(event, JobEnd | JobFailed) for event in events):
                return
