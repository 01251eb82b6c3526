"""Typed keys for what the application and each request carry."""

from __future__ import annotations

from aiohttp import web

from gateway.keys.records import KeyRecord
from gateway.observability.readiness import Readiness
from gateway.observability.record import RequestRecord
from gateway.observability.recorder import Observability
from gateway.pipeline.serving import ServingState

SERVING = web.AppKey("serving", ServingState)
READINESS = web.AppKey("readiness", Readiness)
MAX_BODY_BYTES = web.AppKey("max_body_bytes", int)
OBSERVABILITY = web.AppKey("observability", Observability)

REQUEST_ID = web.RequestKey("request_id", str)
# What the handler learnt (key name, deployment, attempts, tags) for the access log line.
ACCESS_FIELDS = web.RequestKey("access_fields", dict[str, str])
# What the request did, for the metrics and the access log; stages add to it (`RequestRecord` hooks).
RECORD = web.RequestKey("record", RequestRecord)
# Who called (once authenticated): its key's metadata lies under the request's (gateway.http.telemetry).
CALLER = web.RequestKey("caller", KeyRecord)
