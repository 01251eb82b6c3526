"""An upstream stream already in the client API's shape (an OpenAI-compatible upstream, and a
chat-only deployment's native chat requests): its SSE payloads relayed as they came, checked as
every stream is (each a JSON object, no error event, ending with `[DONE]`: an error event is a
scrubbed 502, a cut stream an error)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import orjson

from providers.base import ParsedPayloads
from providers.translated.adapter import answer_error, stream_error_event
from providers.upstream.client import event_too_large, json_object, mid_stream_error, release, truncated_stream
from providers.upstream.scrubbing import Secrets
from providers.upstream.sse import DEFAULT_MAX_EVENT_BYTES, EventTooLarge, SSEDecoder

_MAX_SLICE_BYTES = 8192


class RelayStream:
    """The SSE events of one upstream response, validated as JSON objects as they arrive. An error
    event (`{"error": …}`, as vLLM and OpenAI send one mid-stream) ends it with a scrubbed 502
    `upstream_stream_error`, never relayed as it came."""

    def __init__(
        self,
        response: aiohttp.ClientResponse,
        deployment: str,
        secrets: Secrets,
        timeout_s: float,
        base_url: str,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    ) -> None:
        self._response = response
        self._max_event_bytes = max_event_bytes
        self._deployment = deployment
        self._timeout_s = timeout_s
        self._base_url = base_url
        self._secrets = secrets
        self._finished = False

    async def __aiter__(self) -> AsyncIterator[list[bytes]]:
        decoder = SSEDecoder(self._max_event_bytes)
        try:
            async for read in self._response.content.iter_any():
                # A fast upstream can fill the buffer with hundreds of events: relay them in slices
                # so the first ones leave before the rest are parsed (TTFB flat in stream length).
                for start in range(0, len(read), _MAX_SLICE_BYTES):
                    payloads = decoder.feed(read[start : start + _MAX_SLICE_BYTES])
                    foreign = False
                    for payload in payloads:
                        # Inline, not a call per event: this loop is most of a relay's own work.
                        try:
                            event = orjson.loads(payload)
                        except orjson.JSONDecodeError:
                            event = None
                        if type(event) is not dict or "error" in event:  # the 502s, or a null "error"
                            foreign |= not self._check_event(payload)
                        elif not (event.get("object") or event.get("choices") or event.get("usage")):
                            foreign = True
                    if foreign:  # rare: only Azure's prompt_filter_results frame so far
                        payloads = [payload for payload in payloads if _is_chunk(orjson.loads(payload))]
                    if payloads:
                        yield payloads
                    if decoder.done:
                        self._finished = True
                        return
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise mid_stream_error(exc, self._deployment, self._timeout_s, self._base_url) from None
        except EventTooLarge as exc:
            raise event_too_large(self._deployment, exc.limit) from None
        raise truncated_stream(self._deployment)

    async def aclose(self) -> None:
        await release(self._response, self._finished)

    def _check_event(self, payload: bytes) -> bool:
        """Raises on an error event; False for a frame that is no chunk (to be dropped)."""
        event = json_object(payload, self._deployment, "sent a stream event")
        error = event.get("error")
        if error:
            fields = error if isinstance(error, dict) else {"message": error}
            raise answer_error(stream_error_event(fields), self._deployment, self._secrets)
        return _is_chunk(event)


class ParsedRelayStream(RelayStream):
    """A `RelayStream` whose reads carry the chunks it parsed to check them (`ParsedPayloads`): for
    a stream whose every chunk is read downstream (`UpstreamRequest.parsed`), which then parses none
    again. A loop of its own, as the relay's, but keeping each chunk: a stream relayed as it came
    keeps the relay's, which keeps none."""

    async def __aiter__(self) -> AsyncIterator[list[bytes]]:
        decoder = SSEDecoder(self._max_event_bytes)
        try:
            async for read in self._response.content.iter_any():
                for start in range(0, len(read), _MAX_SLICE_BYTES):
                    payloads = decoder.feed(read[start : start + _MAX_SLICE_BYTES])
                    chunks: list[Any] = []
                    foreign = False
                    for payload in payloads:
                        try:
                            event = orjson.loads(payload)
                        except orjson.JSONDecodeError:
                            event = None
                        if type(event) is not dict or "error" in event:  # the 502s, or a null "error"
                            foreign |= not self._check_event(payload)
                        elif not (event.get("object") or event.get("choices") or event.get("usage")):
                            foreign = True
                        chunks.append(event)
                    if foreign:  # (an event that is no object raised in `_check_event`)
                        kept = [
                            (payload, chunk)
                            for payload, chunk in zip(payloads, chunks, strict=True)
                            if _is_chunk(chunk)
                        ]
                        payloads, chunks = [payload for payload, _ in kept], [chunk for _, chunk in kept]
                    if payloads:
                        yield ParsedPayloads(payloads, chunks)
                    if decoder.done:
                        self._finished = True
                        return
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise mid_stream_error(exc, self._deployment, self._timeout_s, self._base_url) from None
        except EventTooLarge as exc:
            raise event_too_large(self._deployment, exc.limit) from None
        raise truncated_stream(self._deployment)


def _is_chunk(event: dict[str, Any]) -> bool:
    """Not Azure's first frame of a stream, `{"choices":[],"created":0,"id":"","model":"","object":"",
    "prompt_filter_results":[…]}`: strict clients reject a chunk with an empty `object`."""
    return bool(event.get("object") or event.get("choices") or event.get("usage"))
