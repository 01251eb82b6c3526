"""Typed keys for what the application and each request carry."""

from __future__ import annotations

from aiohttp import web

from gateway.config_loader import LoadedConfig
from gateway.pipeline import Pipeline
from gateway.readiness import Readiness

CONFIG = web.AppKey("config", LoadedConfig)
PIPELINE = web.AppKey("pipeline", Pipeline)
READINESS = web.AppKey("readiness", Readiness)
MAX_BODY_BYTES = web.AppKey("max_body_bytes", int)

REQUEST_ID = web.RequestKey("request_id", str)
