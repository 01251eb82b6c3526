"""Typed keys for what the application and each request carry."""

from __future__ import annotations

from aiohttp import web

from gateway.readiness import Readiness
from gateway.serving import ServingState

SERVING = web.AppKey("serving", ServingState)
READINESS = web.AppKey("readiness", Readiness)
MAX_BODY_BYTES = web.AppKey("max_body_bytes", int)

REQUEST_ID = web.RequestKey("request_id", str)
# What the handler learnt (key name, deployment, attempts, tags) for the access log line.
ACCESS_FIELDS = web.RequestKey("access_fields", dict[str, str])
