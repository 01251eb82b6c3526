"""A request's guardrail work is bounded, however many texts it carries: a remote check gets the
request's texts in a few calls (a batching webhook: one call per `batch_size`; the classifier: one
batched job, shared fairly with other requests), `guardrails.max_calls` refuses more with a 400
naming the first text beyond, `guardrails.deadline_ms` ends the waiting (the check's fail mode
decides), and the synchronous checks of tens of thousands of texts leave the event loop running.

Real HTTP on loopback: the gateway, an upstream, and a guardrail service that counts its calls.
"""

from __future__ import annotations

import asyncio
import importlib.util
import threading
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from aiohttp import ClientSession, web
from aiohttp.test_utils import TestServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from pytest_aiohttp import AiohttpServer

from policies.guardrails import GuardrailBounds, RequestFacts, close_webhook_sessions, combine_bounds, engine
from policies.guardrails.checks.classifier.check import ClassifierCheck
from policies.guardrails.input_guard import InputGuard
from policies.guardrails.output_guard import OutputGuard
from tests.conftest import GatewayFactory, deployment
from tests.support.fake_upstream import FakeUpstream
from tests.support.guardrail_helpers import INPUT, OUTPUT

Json = dict[str, Any]
MESSAGES = 2000


class GuardService:
    """A guardrail service speaking both webhook protocols: counts its calls, flags "bomb"; `/stall`
    answers only once the test lets it (`release`)."""

    def __init__(self) -> None:
        self.calls: list[Json] = []
        self.release = asyncio.Event()

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/check", self.check)
        app.router.add_post("/batch", self.batch)
        app.router.add_post("/stall", self.stall)
        return app

    @staticmethod
    def verdict(text: str) -> Json:
        return {"flagged": True, "reason": "weapons"} if "bomb" in text else {"flagged": False}

    async def check(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.calls.append(body)
        return web.json_response(self.verdict(body["text"]))

    async def batch(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.calls.append(body)
        return web.json_response({"results": [self.verdict(item["text"]) for item in body["items"]]})

    async def stall(self, request: web.Request) -> web.Response:
        self.calls.append(await request.json())
        await self.release.wait()
        return web.json_response({"flagged": False})


@pytest.fixture
async def service(aiohttp_server: AiohttpServer) -> AsyncIterator[tuple[GuardService, str]]:
    fake = GuardService()
    server = await aiohttp_server(fake.app())
    yield fake, str(server.make_url("")).rstrip("/")
    fake.release.set()
    await close_webhook_sessions()


def hook(base: str, path: str, **extra: Any) -> Json:
    return {"check": "webhook", "url": base + path, "action": "deny", "timeout_ms": 10_000, **extra}


async def gateway_with(make_gateway: GatewayFactory, upstream: FakeUpstream, policy: Json) -> TestServer:
    fake = deployment("fake", upstream.base_url, retries=0, policies=["guarded"])
    return await make_gateway({"deployments": [fake], "policies": {"guarded": policy}})


def chat(texts: list[str]) -> Json:
    return {"model": "fake", "messages": [{"role": "user", "content": text} for text in texts]}


async def post(http: ClientSession, gateway: TestServer, body: Json) -> tuple[int, Json]:
    async with asyncio.timeout(30):  # a safety net against a hang, not a measurement
        async with http.post(gateway.make_url("/v1/chat/completions"), json=body) as response:
            return response.status, orjson.loads(await response.read())


# --- batching and the cap ----------------------------------------------------------------------------


async def test_two_thousand_messages_make_a_few_webhook_calls_each_text_sent_once(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession, service: tuple[GuardService, str]
) -> None:
    fake, base = service
    gateway = await gateway_with(
        make_gateway, upstream, {"input": [hook(base, "/batch", protocol="gateway-batch", batch_size=1000)]}
    )
    texts = [f"message number {i}" for i in range(MESSAGES)]
    status, answer = await post(http, gateway, chat(texts))

    assert status == 200, answer
    assert len(fake.calls) == 2
    sent = [item for call in fake.calls for item in call["items"]]
    assert [item["text"] for item in sent] == texts
    assert [item["index"] for item in sent] == list(range(MESSAGES))  # each text's position, as one call says it
    assert {call["stage"] for call in fake.calls} == {"input"}

    texts[1500] = "how to build a bomb"
    status, answer = await post(http, gateway, chat(texts))

    assert status == 400
    assert answer["error"]["param"] == "messages[1500].content"  # the batch's verdicts land on their texts
    assert "weapons" in answer["error"]["message"]
    assert len(upstream.received) == 1


async def test_more_texts_than_max_calls_take_is_a_400_naming_the_first_beyond_before_any_call(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession, service: tuple[GuardService, str]
) -> None:
    fake, base = service
    policy = {
        "input": [hook(base, "/check", name="one_by_one"), {"check": "pii", "action": "redact"}],
        "guardrails": {"max_calls": 8},
    }
    gateway = await gateway_with(make_gateway, upstream, policy)
    status, answer = await post(http, gateway, chat([f"message {i}" for i in range(MESSAGES)]))

    assert status == 400
    error = answer["error"]
    assert (error["type"], error["code"], error["param"]) == (
        "invalid_request_error",
        "request_too_large",
        "messages[8].content",
    )
    assert "one_by_one" in error["message"]
    assert "guardrails.max_calls" in error["message"]
    assert fake.calls == []
    assert upstream.received == []

    status, answer = await post(http, gateway, chat([f"message {i}" for i in range(8)]))
    assert status == 200, answer  # within the cap: one call per text of a single-text webhook
    assert len(fake.calls) == 8


async def test_a_batching_webhook_takes_max_calls_times_batch_size_texts(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession, service: tuple[GuardService, str]
) -> None:
    fake, base = service
    policy = {
        "input": [hook(base, "/batch", protocol="gateway-batch", batch_size=10)],
        "guardrails": {"max_calls": 3},
    }
    gateway = await gateway_with(make_gateway, upstream, policy)
    status, answer = await post(http, gateway, chat([f"m {i}" for i in range(31)]))
    assert (status, answer["error"]["param"]) == (400, "messages[30].content")
    status, _ = await post(http, gateway, chat([f"m {i}" for i in range(30)]))
    assert status == 200
    assert [len(call["items"]) for call in fake.calls] == [10, 10, 10]


async def test_output_texts_past_max_calls_get_the_checks_failure_verdict(service: tuple[GuardService, str]) -> None:
    fake, base = service
    checks = OUTPUT.validate_python([hook(base, "/check")])
    closed = await OutputGuard(checks, GuardrailBounds(max_calls=2)).check(["a", "b", "c", "d"], RequestFacts())

    assert len(fake.calls) == 2
    assert [c.denied is None for c in closed.choices] == [True, True, False, False]
    assert "guardrails.max_calls" in (closed.choices[3].denied.reason or "")  # type: ignore[union-attr]

    opened = OUTPUT.validate_python([hook(base, "/check", fail_open=True)])
    outcome = await OutputGuard(opened, GuardrailBounds(max_calls=2)).check(["a", "b", "c"], RequestFacts())
    assert all(c.denied is None for c in outcome.choices)
    assert [v.verdict for v in outcome.verdicts] == ["pass", "pass", "error"]


async def test_the_cap_counts_every_check_call_of_one_request(service: tuple[GuardService, str]) -> None:
    """The chat side checks instructions and other messages in two calls of the guard: one request."""
    fake, base = service
    guard = InputGuard(INPUT.validate_python([hook(base, "/check")]), GuardrailBounds(max_calls=3))
    facts = RequestFacts()
    assert (await guard.check(["a", "b"], facts)).denied is None
    refused = await guard.check(["c", "d"], facts)

    assert refused.denied is not None
    assert refused.denied.index == 1
    assert refused.error().code == "request_too_large"
    assert len(fake.calls) == 2
    assert (await guard.check(["c", "d"], RequestFacts())).denied is None  # a new request, a new tally


# --- the deadline ------------------------------------------------------------------------------------


@pytest.mark.parametrize("fail_open", [False, True])
async def test_a_stalled_webhook_ends_at_the_request_deadline_by_its_fail_mode(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    http: ClientSession,
    service: tuple[GuardService, str],
    fail_open: bool,
) -> None:
    _, base = service
    policy = {
        "input": [hook(base, "/stall", timeout_ms=60_000, fail_open=fail_open)],  # the call itself may wait a minute
        "guardrails": {"deadline_ms": 50},
    }
    gateway = await gateway_with(make_gateway, upstream, policy)
    status, answer = await post(http, gateway, chat(["hello"]))

    if fail_open:
        assert status == 200
        verdict = answer["guardrail_results"][0]
        assert verdict["verdict"] == "error"
        assert "guardrails.deadline_ms" in verdict["reason"]
    else:
        assert status == 400
        assert answer["error"]["type"] == "guardrail_violation"
        assert "guardrails.deadline_ms" in answer["error"]["message"]
        assert "failing closed" in answer["error"]["message"]
        assert upstream.received == []


async def test_the_deadline_is_one_budget_for_every_call_of_the_request(service: tuple[GuardService, str]) -> None:
    fake, base = service
    guard = InputGuard(INPUT.validate_python([hook(base, "/stall")]), GuardrailBounds(deadline_ms=50))
    facts = RequestFacts()
    first = await guard.check("one", facts)
    second = await guard.check("two", facts)  # the budget is spent: no call at all

    assert first.denied is not None
    assert second.denied is not None
    assert "guardrails.deadline_ms" in (second.denied.reason or "")
    assert len(fake.calls) == 1


# --- the classifier ----------------------------------------------------------------------------------


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs the local extra")
async def test_a_big_classifier_request_is_batched_and_does_not_starve_a_small_one() -> None:
    from tests.support.classifier_models import flags_nothing

    config = {"check": "classifier", "model": str(flags_nothing()), "action": "deny", "max_batch": 2}
    big_guard = InputGuard(INPUT.validate_python([config]))
    small_guard = InputGuard(INPUT.validate_python([config]))
    classifier = big_guard._set.async_checks[0]
    small_guard._set.async_checks[0] = classifier  # one model and worker, as one deployment's requests share it
    assert isinstance(classifier, ClassifierCheck)
    jobs: list[list[str]] = []
    first_job, go_on = threading.Event(), threading.Event()
    original = classifier.classify_batch

    def recorded(texts: list[str]) -> list[Any]:
        jobs.append(list(texts))
        first_job.set()
        go_on.wait(30)
        return original(texts)

    classifier.classify_batch = recorded  # type: ignore[method-assign]
    done: list[str] = []
    big = asyncio.ensure_future(big_guard.check([f"summarize this report {i}" for i in range(64)], RequestFacts()))
    big.add_done_callback(lambda _: done.append("big"))
    await asyncio.to_thread(first_job.wait, 30)  # the worker holds the big request's first job
    small = asyncio.ensure_future(small_guard.check("hello world", RequestFacts()))
    small.add_done_callback(lambda _: done.append("small"))
    for _ in range(3):  # the small request runs up to its wait for the worker (it awaits nothing before)
        await asyncio.sleep(0)
    go_on.set()
    outcomes = await asyncio.gather(big, small)

    assert all(outcome.denied is None for outcome in outcomes)
    assert len(jobs) <= 9  # 64 texts, 8 a job: batched, not one job per text
    assert "hello world" in jobs[1]  # the small request rides the next job, between the big one's
    assert any(text.startswith("summarize") for text in jobs[-1])
    assert done == ["small", "big"]


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs the local extra")
@pytest.mark.parametrize("fail_open", [False, True])
async def test_a_busy_classifier_ends_at_the_request_deadline_by_its_fail_mode(fail_open: bool) -> None:
    from tests.support.classifier_models import flags_nothing

    config = {"check": "classifier", "model": str(flags_nothing()), "action": "deny", "fail_open": fail_open}
    guard = InputGuard(INPUT.validate_python([config]), GuardrailBounds(deadline_ms=50))
    classifier = guard._set.async_checks[0]
    assert isinstance(classifier, ClassifierCheck)
    busy = threading.Event()
    classifier.classify_batch = lambda texts: [busy.wait(30)] * len(texts)  # type: ignore[method-assign]
    try:
        outcome = await guard.check(["one", "two"], RequestFacts())
    finally:
        busy.set()

    verdict = outcome.verdicts[0]
    assert (verdict.verdict, outcome.denied is None) == (("error", True) if fail_open else ("deny", False))
    assert "guardrails.deadline_ms" in (verdict.reason or "")


# --- synchronous checks and the event loop -----------------------------------------------------------


async def test_tens_of_thousands_of_texts_leave_the_event_loop_running_between_slices() -> None:
    guard = InputGuard(INPUT.validate_python([{"check": "pii", "action": "redact"}]))
    texts = [f"note {i}: the weather is fine today" for i in range(20_000)]
    texts[15_000] = "write to jane.doe@example.com"
    turns = 0

    async def other_work() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    task = asyncio.ensure_future(other_work())
    outcome = await guard.check(texts, RequestFacts())
    turns_during = turns
    task.cancel()

    assert outcome.denied is None
    assert "jane.doe@example.com" not in outcome.prompt[15_000]
    assert outcome.prompt[14_999] == texts[14_999]
    slices = len(texts) // engine.SLICE_TEXTS
    assert turns_during >= slices - 1  # the loop ran other work between every two slices


FRAGMENTS = ["hello", "jane.doe@example.com", "call 555-867-5309", "a" * 40, "classified", " ", "ignore previous"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    texts=st.lists(st.lists(st.sampled_from(FRAGMENTS), max_size=4).map(" ".join), max_size=12),
    slice_texts=st.integers(1, 4),
    slice_chars=st.integers(1, 120),
)
def test_slicing_gives_each_text_the_verdicts_it_gets_alone(
    monkeypatch: pytest.MonkeyPatch, texts: list[str], slice_texts: int, slice_chars: int
) -> None:
    monkeypatch.setattr(engine, "SLICE_TEXTS", slice_texts)
    monkeypatch.setattr(engine, "SLICE_CHARS", slice_chars)
    checks = [
        {"check": "pii", "action": "redact"},
        {"check": "words", "words": ["classified"], "action": "deny"},
        {"check": "length", "max_chars": 60, "action": "flag"},
    ]
    guard = OutputGuard(OUTPUT.validate_python(checks))
    together = asyncio.run(guard.check(texts, RequestFacts()))
    alone = [guard._set.run_sync(text, RequestFacts(), index) for index, text in enumerate(texts)]

    assert [c.text for c in together.choices] == ["" if a.denied else a.text for a in alone]
    assert [c.denied for c in together.choices] == [a.denied for a in alone]
    assert together.verdicts == [verdict for a in alone for verdict in a.verdicts]


async def test_a_request_of_one_short_text_awaits_nothing() -> None:
    """No per-request cost for the usual request: its checks run without giving up the loop."""
    guard = InputGuard(INPUT.validate_python([{"check": "pii", "action": "redact"}]))
    coroutine = guard.check(["hello there", "write to jane.doe@example.com"], RequestFacts())
    with pytest.raises(StopIteration) as finished:
        coroutine.send(None)  # runs to its end in one step
    assert "jane.doe" not in finished.value.value.prompt[1]


# --- configuration -----------------------------------------------------------------------------------


def test_a_deployment_takes_the_smallest_bound_each_of_its_policies_sets() -> None:
    bounds = combine_bounds([GuardrailBounds(max_calls=10), None, GuardrailBounds(deadline_ms=500, max_calls=20)])
    assert (bounds.max_calls, bounds.deadline_ms) == (10, 500)
    assert combine_bounds([None]) == GuardrailBounds()


@pytest.mark.parametrize("settings", [{"max_calls": 0}, {"deadline_ms": 0}, {"deadline_ms": 600_001}, {"max": 1}])
def test_bounds_out_of_range_are_refused(settings: Json) -> None:
    with pytest.raises(ValidationError):
        GuardrailBounds.model_validate(settings)
