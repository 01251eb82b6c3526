"""Closing a gateway ends even when a request's work never does: what is still running after the
wrap-up time is cancelled (and logged), so a task stuck on a peer that never answers cannot keep a
worker from exiting."""

from __future__ import annotations

import asyncio
import logging

import pytest
from aiohttp.test_utils import TestServer

from gateway.http.app_keys import SERVING
from gateway.pipeline import serving as serving_module


async def test_a_request_task_that_never_ends_is_cancelled_at_close(
    gateway: TestServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(serving_module, "WRAP_UP_S", 0.05)
    serving = gateway.app[SERVING]
    never = asyncio.Event()
    stuck = serving.spawn(never.wait())  # a request's settlement waiting on something that never answers

    with caplog.at_level(logging.WARNING):
        await asyncio.wait_for(serving.aclose(), timeout=30)  # before the bound: forever

    assert stuck.cancelled()
    assert "cancelling 1 tasks" in caplog.text
