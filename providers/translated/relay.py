"""An upstream stream already in the client API's shape (a chat-only deployment's native chat
requests): its SSE payloads relayed as they came, checked as every stream is (each a JSON object,
no error event, ending with `[DONE]`: an error event is a scrubbed 502, a cut stream an error)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp

from providers.translated.adapter import answer_error, stream_error_event
from providers.upstream.client import event_too_large, json_object, mid_stream_error, release, truncated_stream
from providers.upstream.scrubbing import Secrets
from providers.upstream.sse import DEFAULT_MAX_EVENT_BYTES, EventTooLarge, SSEDecoder


class RelayStream:
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
        self._deployment = deployment
        self._secrets = secrets
        self._timeout_s = timeout_s
        self._base_url = base_url  # named in transport errors (without credentials or query)
        self._max_event_bytes = max_event_bytes
        self._finished = False

    async def __aiter__(self) -> AsyncIterator[list[bytes]]:
        decoder = SSEDecoder(self._max_event_bytes)
        try:
            async for read in self._response.content.iter_any():
                payloads = decoder.feed(read)
                for payload in payloads:
                    self._check(payload)
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

    def _check(self, payload: bytes) -> None:
        error = json_object(payload, self._deployment, "sent a stream event").get("error")
        if error:
            fields = error if isinstance(error, dict) else {"message": error}
            raise answer_error(stream_error_event(fields), self._deployment, self._secrets)
