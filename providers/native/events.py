"""A native API's stream events relayed as they came: the loop the Messages and Responses
pass-throughs share.

Each event's `data` payload is yielded as sent, and checked as every stream is: a JSON object, the
few kinds the API's stream reads (`observed`) handed to `_observe`, which ends the stream by setting
`_ended` and raises on an `error` event; a stream cut before its closing event (`closing`) is an
error, and so is a read that fails, times out or holds an event over the size bound.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, ClassVar

import aiohttp
import orjson

from providers.upstream.client import (
    event_too_large,
    json_object,
    mid_stream_error,
    release,
    truncated_stream,
)
from providers.upstream.scrubbing import Secrets
from providers.upstream.sse import EventTooLarge, SSEDecoder


class RelayedEvents:
    observed: ClassVar[frozenset[str]]  # the event types `_observe` reads
    closing: ClassVar[str]  # the event a whole stream ends with (named in the truncation error)
    ends_at_done: ClassVar[bool] = False  # a `[DONE]` before the closing event cuts the stream

    def __init__(
        self,
        response: aiohttp.ClientResponse,
        deployment: str,
        secrets: Secrets,
        timeout_s: float,
        base_url: str,
        max_event_bytes: int,
    ) -> None:
        self._response = response
        self._deployment = deployment
        self._secrets = secrets
        self._timeout_s = timeout_s
        self._base_url = base_url
        self._max_event_bytes = max_event_bytes
        self._ended = False  # the closing event was read
        self._finished = False  # ... and the response released as whole

    def _observe(self, event: dict[str, Any]) -> None:
        raise NotImplementedError

    async def __aiter__(self) -> AsyncIterator[list[bytes]]:
        decoder = SSEDecoder(self._max_event_bytes)
        observed = self.observed
        try:
            async for read in self._response.content.iter_any():
                payloads = decoder.feed(read)
                for payload in payloads:
                    # Inline, not a call per event (most of a relay's own work, as in `RelayStream`):
                    # each is a JSON object; only the few the API's stream reads are read further.
                    try:
                        event = orjson.loads(payload)
                    except orjson.JSONDecodeError:
                        event = None
                    if type(event) is not dict:
                        event = json_object(payload, self._deployment, "sent a stream event")  # raises
                    if event.get("type") in observed:
                        self._observe(event)
                if payloads:
                    yield payloads
                if self._ended:
                    self._finished = True
                    return
                if decoder.done and self.ends_at_done:  # `[DONE]` before the closing event
                    break
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise mid_stream_error(exc, self._deployment, self._timeout_s, self._base_url) from None
        except EventTooLarge as exc:
            raise event_too_large(self._deployment, exc.limit) from None
        raise truncated_stream(self._deployment, self.closing)

    async def aclose(self) -> None:
        await release(self._response, self._finished)
