"""`webhook`: post the text to an external guardrail service (Presidio, Llama Guard, your own).

``protocol: gateway`` (default) is this contract, small enough to put in front of any model::

    POST <url>   {"text": "...", "stage": "input"|"output", "check": "<name>", "index": 0,
                  "prompt": "..." | null, "context": "..." | null}
    200          {"flagged": true|false, "reason": "...", "score": 0.9, "labels": ["S1"], "text": "..."}

``flagged: true`` applies the check's action; ``text`` is the redacted text (needed by ``redact``:
a flagged answer without it is denied). Only ``flagged`` is required. One call per text.

``protocol: gateway-batch`` is the same contract for many texts a call: all the texts of a request
(``batch_size`` a call), each item as a ``gateway`` call would send it, one result per item, in order::

    POST <url>   {"stage": "input"|"output", "check": "<name>", "context": "..." | null,
                  "items": [{"text": "...", "index": 0, "prompt": "..." | null}, ...]}
    200          {"results": [{"flagged": false}, {"flagged": true, "reason": "...", "text": "..."}, ...]}

A ``results`` list of another length is an answer not understood (every text of the call fails).

``protocol: presidio`` speaks Presidio's analyzer directly: it posts ``{"text", "language"}`` to
``/analyze`` and reads back its list of ``{"entity_type", "start", "end", "score"}``; results at or
above ``min_score`` are hits, redacted here with ``placeholder``. One call per text.

A request's texts are sent one call after another, and the request's bounds apply (see `bounds`):
at most ``guardrails.max_calls`` calls per request and stage, none waited for past its deadline.

Each webhook check has its own connection pool (its own session), ``max_connections`` wide, so a
slow service never takes the connections of another. A call first waits at most ``max_wait_ms``
for a free connection of its pool; ``timeout_ms`` then bounds the call itself (connect, send,
answer). Redirects are never followed (a 3xx is a failure: a POST turned into a GET, or credential
headers sent elsewhere, must not decide a verdict), and the answer is read up to
``max_response_bytes`` (after decompression).

Failures (no free connection within ``max_wait_ms``: "webhook at capacity"; timeout after
``timeout_ms``; connection error; a redirect; non-2xx; an answer over ``max_response_bytes``;
unreadable body) record verdict ``error``; with ``fail_open: false`` (default) they also count as a
hit, so a deny policy denies while its guardrail service is down, and with ``fail_open: true`` the
text passes. On streams this check runs at the end of each choice (see `stream_guard`).

The pools are made on first use, on the running event loop; `close_webhook_sessions` (or
`WebhookCheck.aclose`) closes them, and a check dropped by a config reload closes its pool when it
is garbage-collected.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import Sequence
from typing import Any, Literal

import aiohttp
import orjson
from pydantic import Field, HttpUrl

from policies.guardrails.base import CheckConfig, Finding, RequestFacts, merge, redact
from policies.guardrails.bounds import DEADLINE_PASSED
from policies.guardrails.verdict import Stage

MAX_CONNECTIONS = 64
MAX_WAIT_MS = 1000.0
MAX_RESPONSE_BYTES = 1024 * 1024
_READ_CHUNK = 64 * 1024


class WebhookConfig(CheckConfig):
    check: Literal["webhook"]
    # Where texts are POSTed for a verdict.
    url: HttpUrl
    timeout_ms: float = Field(default=500.0, gt=0, le=60_000)  # the call itself, once it has a connection
    max_connections: int = Field(default=MAX_CONNECTIONS, ge=1, le=1024)  # this check's own pool
    max_wait_ms: float = Field(default=MAX_WAIT_MS, ge=0, le=60_000)  # for a free connection of the pool
    max_response_bytes: int = Field(default=MAX_RESPONSE_BYTES, ge=64, le=64 * 1024 * 1024)  # decompressed
    # true: a failed or late webhook lets the text through; false: refused.
    fail_open: bool = False
    headers: dict[str, str] = Field(default_factory=dict)  # e.g. {"Authorization": "Bearer ${GUARD_TOKEN}"}
    # gateway: one text per call; gateway-batch: a request's texts in one call.
    protocol: Literal["gateway", "gateway-batch", "presidio"] = "gateway"
    batch_size: int = Field(default=256, ge=1, le=4096)  # gateway-batch: texts per call
    language: str = "en"  # presidio
    min_score: float = Field(default=0.5, ge=0.0, le=1.0)  # presidio
    placeholder: str = "[{entity}]"  # presidio

    def build(self) -> WebhookCheck:
        return WebhookCheck(self)


class BadAnswer(ValueError):
    """The service answered something this protocol cannot read."""


class _Failure(Exception):
    """The call failed: the message is the verdict's reason."""


class _TooLarge(Exception):
    pass


class _Pool:
    """One check's connections on one event loop: the session, and the slots that bound the wait."""

    def __init__(self, config: WebhookConfig) -> None:
        self.loop = asyncio.get_running_loop()
        connector = aiohttp.TCPConnector(limit=config.max_connections, limit_per_host=0)
        self.session = aiohttp.ClientSession(connector=connector)
        self.slots = asyncio.Semaphore(config.max_connections)


_LIVE: weakref.WeakSet[WebhookCheck] = weakref.WeakSet()
_CLOSING: set[asyncio.Task[None]] = set()


async def close_webhook_sessions() -> None:
    """Close the pools of every webhook check made on this loop (at shutdown)."""
    for check in list(_LIVE):
        await check.aclose()


def _abandon(session: aiohttp.ClientSession, loop: asyncio.AbstractEventLoop) -> None:
    """A check dropped without `aclose` (a config reload): close its pool on its own loop."""
    if session.closed or loop.is_closed():
        return

    def close() -> None:
        task = loop.create_task(session.close())
        _CLOSING.add(task)
        task.add_done_callback(_CLOSING.discard)

    with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
        loop.call_soon_threadsafe(close)


class WebhookCheck:
    is_async = True
    needs_text = True

    def __init__(self, config: WebhookConfig) -> None:
        self.config = config
        self._url = str(config.url)
        self._timeout = aiohttp.ClientTimeout(total=config.timeout_ms / 1000)
        self._wait_s = config.max_wait_ms / 1000
        self._pool: _Pool | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None
        self.texts_per_call = config.batch_size if config.protocol == "gateway-batch" else 1
        _LIVE.add(self)

    def evaluate(self, text: str, facts: RequestFacts, stage: Stage, index: int) -> Finding:
        raise TypeError("the webhook check is asynchronous: call evaluate_async")

    def pool(self) -> _Pool:
        """This check's pool on the running loop, made on first use."""
        pool = self._pool
        if pool is None or pool.session.closed or pool.loop is not asyncio.get_running_loop():
            if self._finalizer is not None:
                self._finalizer()  # a pool of another (finished) loop
            pool = self._pool = _Pool(self.config)
            self._finalizer = weakref.finalize(self, _abandon, pool.session, pool.loop)
        return pool

    async def aclose(self) -> None:
        pool, self._pool = self._pool, None
        finalizer, self._finalizer = self._finalizer, None
        if pool is not None and pool.loop is asyncio.get_running_loop():
            if finalizer is not None:
                finalizer.detach()
            await pool.session.close()
        elif finalizer is not None:
            finalizer()  # a pool of another loop: closed on that loop, if it still runs

    async def evaluate_async(self, text: str, facts: RequestFacts, stage: Stage, index: int) -> Finding:
        return (await self.evaluate_batch([text], facts, stage, [index], None))[0]

    async def evaluate_batch(
        self, texts: Sequence[str], facts: RequestFacts, stage: Stage, indexes: Sequence[int], deadline: float | None
    ) -> list[Finding]:
        """The texts `texts_per_call` a call, one call after another; those with no answer by `deadline`
        (event-loop time) get the failure verdict."""
        found: list[Finding] = []
        size = self.texts_per_call
        try:
            async with asyncio.timeout_at(deadline):
                for start in range(0, len(texts), size):
                    found += await self._judge(texts[start : start + size], facts, stage, indexes[start : start + size])
        except TimeoutError:
            found += [self.failure(DEADLINE_PASSED)] * (len(texts) - len(found))
        return found

    async def _judge(
        self, texts: Sequence[str], facts: RequestFacts, stage: Stage, indexes: Sequence[int]
    ) -> list[Finding]:
        """One call's findings, one per text."""
        pool = self.pool()
        try:
            if pool.slots.locked():  # every connection busy: wait, but only so long
                async with asyncio.timeout(self._wait_s):
                    await pool.slots.acquire()
            else:
                await pool.slots.acquire()
        except TimeoutError:
            reason = (
                f"webhook at capacity: no free connection of its {self.config.max_connections} "
                f"within {self.config.max_wait_ms:g} ms"
            )
            return [self.failure(reason)] * len(texts)
        try:
            answer = await self._call(pool.session, self._payload(texts, facts, stage, indexes))
        except _Failure as failure:
            return [self.failure(str(failure))] * len(texts)
        finally:
            pool.slots.release()
        try:
            return self._read_all(answer, texts)
        except BadAnswer as exc:
            return [self.failure(f"guardrail service answer not understood: {exc}")] * len(texts)

    async def _call(self, session: aiohttp.ClientSession, payload: dict[str, Any]) -> Any:
        try:
            async with session.post(
                self._url,
                json=payload,
                headers=self.config.headers,
                timeout=self._timeout,
                allow_redirects=False,
            ) as response:
                if 300 <= response.status < 400:
                    raise _Failure(f"guardrail service answered a redirect (HTTP {response.status}), not followed")
                if response.status >= 300:
                    raise _Failure(f"guardrail service answered HTTP {response.status}")
                body = await self._body(response)
            return orjson.loads(body)
        except TimeoutError:
            raise _Failure(f"guardrail service timed out after {self.config.timeout_ms:g} ms") from None
        except _TooLarge:
            raise _Failure(
                f"guardrail service answer larger than max_response_bytes ({self.config.max_response_bytes})"
            ) from None
        except (aiohttp.ClientError, ValueError) as exc:
            raise _Failure(f"guardrail service unreachable or unreadable: {type(exc).__name__}") from None

    async def _body(self, response: aiohttp.ClientResponse) -> bytes:
        """The answer, decompressed, read no further than `max_response_bytes`."""
        cap = self.config.max_response_bytes
        if (
            response.content_length is not None
            and response.content_length > cap
            and not response.headers.get("Content-Encoding")
        ):
            raise _TooLarge
        parts: list[bytes] = []
        size = 0
        async for chunk in response.content.iter_chunked(_READ_CHUNK):
            size += len(chunk)
            if size > cap:
                raise _TooLarge
            parts.append(chunk)
        return b"".join(parts)

    def _payload(
        self, texts: Sequence[str], facts: RequestFacts, stage: Stage, indexes: Sequence[int]
    ) -> dict[str, Any]:
        if self.config.protocol == "presidio":
            return {"text": texts[0], "language": self.config.language}
        items = [
            {"text": text, "index": index, "prompt": facts.prompt_for(index) if stage == "output" else None}
            for text, index in zip(texts, indexes, strict=True)
        ]
        if self.config.protocol == "gateway":
            return {**items[0], "stage": stage, "check": self.config.label, "context": facts.context}
        return {"stage": stage, "check": self.config.label, "context": facts.context, "items": items}

    def _read_all(self, answer: Any, texts: Sequence[str]) -> list[Finding]:
        if self.config.protocol == "presidio":
            return [self._read_presidio(answer, texts[0])]
        if self.config.protocol == "gateway":
            return [self._read(answer)]
        results = answer.get("results") if isinstance(answer, dict) else None
        if not isinstance(results, list) or len(results) != len(texts):
            raise BadAnswer(f"expected an object with 'results', a list of {len(texts)}")
        return [self._read(result) for result in results]

    def _read(self, answer: Any) -> Finding:
        if not isinstance(answer, dict) or not isinstance(answer.get("flagged"), bool):
            raise BadAnswer("expected an object with a boolean 'flagged'")
        labels = answer.get("labels") or []
        replacement = answer.get("text")
        score = answer.get("score")
        return Finding(
            hit=answer["flagged"],
            reason=str(answer.get("reason") or ("flagged by guardrail service" if answer["flagged"] else ""))[:300]
            or None,
            score=float(score) if isinstance(score, int | float) else None,
            labels=tuple(str(label) for label in labels) if isinstance(labels, list) else (),
            text=replacement if isinstance(replacement, str) else None,
        )

    def _read_presidio(self, answer: Any, text: str) -> Finding:
        if not isinstance(answer, list):
            raise BadAnswer("expected a list of analyzer results")
        try:
            hits = [
                (int(r["start"]), int(r["end"]), str(r["entity_type"]))
                for r in answer
                if float(r["score"]) >= self.config.min_score
            ]
        except (KeyError, TypeError, ValueError) as exc:
            raise BadAnswer("analyzer results need entity_type, start, end and score") from exc
        if not hits:
            return Finding(hit=False)
        labels = tuple(dict.fromkeys(entity for _, _, entity in hits))
        spans = merge(
            [(s, e, self.config.placeholder.format(entity=entity)) for s, e, entity in hits if 0 <= s < e <= len(text)]
        )
        return Finding(hit=True, reason=f"found: {', '.join(labels)}", labels=labels, text=redact(text, spans))

    def failure(self, reason: str) -> Finding:
        mode = "failing open" if self.config.fail_open else "failing closed"
        return Finding(hit=not self.config.fail_open, reason=f"{reason}; {mode}", status="error")
