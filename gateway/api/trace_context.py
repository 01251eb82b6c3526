"""W3C Trace Context for the upstream call: the headers (`traceparent`, `tracestate`) the current
upstream attempt's span asks every outgoing request to carry.

A context variable, so providers need nothing but this module: the pipeline sets it around an
attempt when tracing is on, and `providers.upstream.client.post` adds what it holds to the call.
With tracing off it stays None, and an upstream call pays one lookup.
"""

from __future__ import annotations

from contextvars import ContextVar

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
TRACE_ID_HEADER = "x-gateway-trace-id"  # on every answer of a traced request: where to find its trace

UPSTREAM_TRACE_HEADERS: ContextVar[dict[str, str] | None] = ContextVar("upstream_trace_headers", default=None)


def with_trace_headers(headers: dict[str, str]) -> dict[str, str]:
    """`headers`, plus the current attempt's trace context when there is one (a new dict then)."""
    extra = UPSTREAM_TRACE_HEADERS.get()
    return headers if extra is None else {**headers, **extra}
