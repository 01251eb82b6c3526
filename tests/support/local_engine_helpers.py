"""What the local-engine serving tests share: reaching a deployment's engine through the gateway
app, and waiting (bounded) for what the engine's worker thread changes."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from aiohttp.test_utils import TestServer

from gateway.http.app_keys import SERVING
from providers.local.engine import Engine
from providers.local.provider import LocalProvider

SAFETY_S = 60.0  # what a test waits at most for what must happen, before it fails instead of hanging


def local_engine(gateway: TestServer, name: str) -> Engine:
    app = gateway.app
    assert app is not None
    provider = app[SERVING].current.pipeline.deployments[name].provider
    return cast(LocalProvider, provider).engine


async def until(condition: Any, timeout_s: float = SAFETY_S) -> None:
    """Poll what the worker thread changes (no event to await across threads)."""
    for _ in range(int(timeout_s / 0.005)):
        if condition():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"not true within {timeout_s}s")
