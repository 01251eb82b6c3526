"""One line per request on the `gateway.access` logger: who, what, where it went, how it ended.

Fields are `key=value`, values from clients (tags) reduced to a safe character set so that a
header cannot forge log lines. Never a secret: the caller appears by its key's name only.
"""

from __future__ import annotations

import logging
import re
import time

from aiohttp import web

log = logging.getLogger("gateway.access")

_UNSAFE = re.compile(r"[^A-Za-z0-9._:/@,+-]")
_MAX_VALUE = 200


_FROM_RESPONSE = {
    "deployment": "x-gateway-deployment",
    "attempts": "x-gateway-attempts",
    "cache": "x-gateway-cache-status",
}


def write(
    request: web.Request, response: web.StreamResponse, started: float, request_id: str, fields: dict[str, str]
) -> None:
    """`fields`: what the handler added (key name, tags); the deployment and attempts come from
    the response's own headers, so failed requests are described as well as served ones."""
    if not log.isEnabledFor(logging.INFO):  # the check is all a disabled access log costs
        return
    parts = [
        f"request_id={request_id}",
        f"method={request.method}",
        f"path={_safe(request.path)}",
        f"status={response.status}",
        f"ms={(time.perf_counter() - started) * 1000:.2f}",
    ]
    parts += [
        f"{name}={_safe(response.headers[header])}"
        for name, header in _FROM_RESPONSE.items()
        if header in response.headers
    ]
    parts += [f"{name}={_safe(value)}" for name, value in fields.items()]
    log.info("%s", " ".join(parts))


def _safe(value: str) -> str:
    return _UNSAFE.sub("_", value[:_MAX_VALUE])
