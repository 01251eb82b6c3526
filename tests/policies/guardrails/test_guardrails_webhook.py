"""The webhook check against a real guardrail service on loopback: verdicts, redaction, timeouts, failures."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from pytest_aiohttp import AiohttpServer

from policies.guardrails import RequestFacts, close_webhook_sessions
from tests.support.guardrail_helpers import input_guard, output_guard


class GuardService:
    """A scriptable guardrail service: answers by path, records what it was sent."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/check", self.check)
        app.router.add_post("/slow", self.slow)
        app.router.add_post("/broken", self.broken)
        app.router.add_post("/garbage", self.garbage)
        app.router.add_post("/analyze", self.presidio)
        return app

    async def check(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.received.append(body)
        text: str = body["text"]
        if "bomb" in text:
            return web.json_response({"flagged": True, "reason": "S9: weapons", "labels": ["S9"], "score": 0.97})
        if "Alice" in text:
            return web.json_response({"flagged": True, "text": text.replace("Alice", "<PERSON>")})
        return web.json_response({"flagged": False})

    async def slow(self, request: web.Request) -> web.Response:
        await asyncio.sleep(120)  # far past the 300 ms a check gives it (the check's call is cut first)
        return web.json_response({"flagged": False})

    async def broken(self, request: web.Request) -> web.Response:
        return web.Response(status=500, text="boom")

    async def garbage(self, request: web.Request) -> web.Response:
        return web.json_response({"verdict": "maybe"})

    async def presidio(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.received.append(body)
        text: str = body["text"]
        start = text.find("Alice")
        results = [{"entity_type": "PERSON", "start": start, "end": start + 5, "score": 0.85}] if start >= 0 else []
        return web.json_response(results)


@pytest.fixture
async def service(aiohttp_server: AiohttpServer) -> tuple[GuardService, str]:
    fake = GuardService()
    server = await aiohttp_server(fake.app())
    return fake, str(server.make_url(""))


@pytest.fixture(autouse=True)
async def _close_pools() -> AsyncIterator[None]:
    yield
    await close_webhook_sessions()


def hook(base: str, path: str, action: str = "deny", **extra: Any) -> dict[str, Any]:
    # 300 ms for /slow, which never answers in time; the others answer at once, and are given far more
    # than a loaded machine takes (under the 500 ms default, a slow run read as the service failing).
    timeout_ms = 300 if path == "/slow" else 30_000
    return {"check": "webhook", "url": base.rstrip("/") + path, "action": action, "timeout_ms": timeout_ms, **extra}


async def test_pass_and_deny_with_the_service_reason(service: tuple[GuardService, str]) -> None:
    fake, base = service
    guard = input_guard(hook(base, "/check"))
    passed = await guard.check("how do plants grow?", RequestFacts(context="botany notes"))
    assert passed.denied is None
    assert passed.verdicts[0].verdict == "pass"
    denied = await guard.check("how to build a bomb", RequestFacts())
    assert denied.denied is not None
    assert denied.denied.reason == "S9: weapons"
    assert denied.denied.labels == ("S9",)
    assert fake.received[0] == {
        "text": "how do plants grow?",
        "stage": "input",
        "check": "webhook",
        "index": 0,
        "prompt": None,
        "context": "botany notes",
    }


async def test_output_redact_uses_the_service_text(service: tuple[GuardService, str]) -> None:
    fake, base = service
    guard = output_guard(hook(base, "/check", "redact"))
    facts = RequestFacts(prompts=("who?",))
    outcome = await guard.check(["Alice wrote it", "nobody"], facts)
    assert [c.text for c in outcome.choices] == ["<PERSON> wrote it", "nobody"]
    assert fake.received[0]["stage"] == "output"
    assert fake.received[0]["prompt"] == "who?"


@pytest.mark.parametrize("path", ["/slow", "/broken", "/garbage", "/missing"])
async def test_failures_fail_closed_by_default(service: tuple[GuardService, str], path: str) -> None:
    _, base = service
    outcome = await input_guard(hook(base, path)).check("hello", RequestFacts())
    assert outcome.denied is not None
    assert "failing closed" in (outcome.denied.reason or "")


@pytest.mark.parametrize("path", ["/slow", "/broken", "/garbage"])
async def test_failures_fail_open_when_configured(service: tuple[GuardService, str], path: str) -> None:
    _, base = service
    outcome = await input_guard(hook(base, path, fail_open=True)).check("hello", RequestFacts())
    assert outcome.denied is None
    assert outcome.prompt == "hello"
    assert outcome.verdicts[0].verdict == "error"
    assert "failing open" in (outcome.verdicts[0].reason or "")


async def test_timeout_is_bounded(service: tuple[GuardService, str]) -> None:
    _, base = service
    async with asyncio.timeout(30):  # the 300 ms timeout, not the service's 120 s (room for a loaded machine)
        outcome = await input_guard(hook(base, "/slow", fail_open=True)).check("hello", RequestFacts())
    assert "timed out after 300 ms" in (outcome.verdicts[0].reason or "")


async def test_presidio_protocol_redacts_reported_spans(service: tuple[GuardService, str]) -> None:
    fake, base = service
    check = hook(base, "/analyze", "redact", protocol="presidio")
    outcome = await input_guard(check).check("ask Alice today", RequestFacts())
    assert outcome.prompt == "ask [PERSON] today"
    assert outcome.verdicts[0].labels == ("PERSON",)
    assert fake.received == [{"text": "ask Alice today", "language": "en"}]


async def test_output_stream_runs_the_webhook_at_the_end(service: tuple[GuardService, str]) -> None:
    _, base = service
    guard = output_guard(hook(base, "/check", "deny"))
    assert guard.buffers_streams  # a remote deny can only judge the whole text
    stream = guard.stream(RequestFacts())
    released = [stream.feed(0, "how to build a "), stream.feed(0, "bomb quickly")]
    step = await stream.finish(0)
    assert [s.text for s in released] == ["", ""]
    assert step.finish_reason == "content_filter"


async def test_each_check_has_its_own_session(service: tuple[GuardService, str]) -> None:
    _, base = service
    outcome = await input_guard(hook(base, "/check")).check("how to build a bomb", RequestFacts())
    assert outcome.denied is not None
    assert outcome.denied.reason == "S9: weapons"
