"""A real OTLP/HTTP trace receiver on loopback: an aiohttp handler that decodes each
`ExportTraceServiceRequest` (protobuf, as the SDK's exporter posts it) into plain spans."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


@dataclass
class Span:
    name: str
    kind: int  # 2: server, 3: client
    trace_id: str
    span_id: str
    parent_span_id: str
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    resource: dict[str, Any]
    status_code: int  # 0 unset, 1 ok, 2 error


@dataclass
class OtlpReceiver:
    spans: list[Span] = field(default_factory=list)
    raw: list[bytes] = field(default_factory=list)  # every request body as posted
    headers: list[dict[str, str]] = field(default_factory=list)
    url: str = ""  # the base URL (the exporter posts to url + /v1/traces)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/traces", self._export)
        return app

    async def _export(self, request: web.Request) -> web.Response:
        body = await request.read()
        assert request.content_type == "application/x-protobuf"
        self.raw.append(body)
        self.headers.append(dict(request.headers))
        message = ExportTraceServiceRequest()
        message.ParseFromString(body)
        for resource_spans in message.resource_spans:
            resource = _attributes(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    self.spans.append(
                        Span(
                            name=span.name,
                            kind=span.kind,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_span_id=span.parent_span_id.hex(),
                            attributes=_attributes(span.attributes),
                            events=[(event.name, _attributes(event.attributes)) for event in span.events],
                            resource=resource,
                            status_code=span.status.code,
                        )
                    )
        self.arrived.set()
        return web.Response(
            body=ExportTraceServiceResponse().SerializeToString(), content_type="application/x-protobuf"
        )

    async def wait_for(self, count: int, timeout_s: float = 30.0) -> list[Span]:
        """Once at least `count` spans arrived: all of them (`timeout_s` bounds a hang, not a speed)."""
        async with asyncio.timeout(timeout_s):
            while len(self.spans) < count:
                self.arrived.clear()
                await self.arrived.wait()
        return self.spans

    def named(self, name: str) -> list[Span]:
        return [span for span in self.spans if span.name == name]

    def text(self) -> str:
        """Everything exported, decoded, as one text (to search for what must never be there)."""
        return (
            "\n".join(repr(span) for span in self.spans)
            + "\n"
            + "\n".join(body.decode("utf-8", "replace") for body in self.raw)
        )


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return {item.key: _value(item.value) for item in value.kvlist_value.values}
    return getattr(value, kind) if kind else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs}
