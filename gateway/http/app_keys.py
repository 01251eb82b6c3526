"""Typed keys for what the application and each request carry."""

from __future__ import annotations

from aiohttp import web

from gateway.observability.readiness import Readiness
from gateway.observability.record import RequestRecord
from gateway.observability.recorder import Observability
from gateway.pipeline.serving import ServingState

SERVING = web.AppKey("serving", ServingState)
READINESS = web.AppKey("readiness", Readiness)
MAX_BODY_BYTES = web.AppKey("max_body_bytes", int)
OBSERVABILITY = web.AppKey("observability", Observability)

# What the request did, for the metrics, the access log and its span; stages add to it
# (`RequestRecord` hooks). The one per-request key: its id, caller and tags are fields of it.
RECORD = web.RequestKey("record", RequestRecord)
