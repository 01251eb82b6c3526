"""The request log through the real gateway (SQLite in a file, loopback HTTP, the mock deployment):
what an operator finds for each request it answered or refused, through GET /admin/requests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai
import pytest
from aiohttp import ClientSession

from gateway.app import REQUEST_LOG
from gateway.http.app_keys import OBSERVABILITY
from tests.conftest import GatewayFactory, deployment, upstream_url
from tests.support.fake_upstream import FakeUpstream
from tests.support.request_log_helpers import (
    ADMIN_KEY,
    ALPHA_KEY,
    BETA_KEY,
    ENV,
    admin_get,
    database_bytes,
    files_in,
    logged_config,
    record_of,
    sqlite_url,
    wait_for_records,
)

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
HELLO = [{"role": "user", "content": "hi"}]
CANARY = "sk-canary-5f0c1e2d3b4a69788796a5b4c3d2e1f0"


def headers(key: str, request_id: str, **extra: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}", "x-request-id": request_id, **extra}


async def post(http: ClientSession, url: Any, key: str, request_id: str, body: dict[str, Any], **extra: str) -> int:
    async with http.post(url, json=body, headers=headers(key, request_id, **extra)) as answer:
        await answer.read()
        return answer.status


async def test_answered_refused_and_streamed_requests_are_recorded_with_what_happened(
    make_gateway: GatewayFactory, http: ClientSession, tmp_path: Path
) -> None:
    gateway = await make_gateway(logged_config(sqlite_url(tmp_path)), ENV)
    completions, chat = gateway.make_url("/v1/completions"), gateway.make_url("/v1/chat/completions")
    prompt = {"model": "mock-model", "prompt": "Say this is a test", "max_tokens": 5}
    sent = [
        (completions, ALPHA_KEY, "answered", prompt, 200, {"traceparent": TRACEPARENT}),
        (completions, ALPHA_KEY, "denied", {**prompt, "prompt": "a forbidden word"}, 400, {}),
        (chat, ALPHA_KEY, "streamed", {"model": "other", "messages": HELLO, "stream": True, "max_tokens": 6}, 200, {}),
        (completions, ALPHA_KEY, "fourth", prompt, 200, {}),
        (completions, ALPHA_KEY, "limited", prompt, 429, {}),  # rpm 3: the denied request was never admitted
        (completions, CANARY, "unknown-key", prompt, 401, {}),
    ]
    for url, key, request_id, body, status, extra in sent:
        assert await post(http, url, key, request_id, body, **extra) == status, request_id

    answered = await record_of(http, gateway, "answered")
    assert answered["key"] == "alpha"
    assert answered["team"] == "search"
    assert answered["metadata"] == {"team": "search"}
    assert (answered["api"], answered["model"], answered["deployment"], answered["provider"]) == (
        "completions",
        "mock-model",
        "mock",
        "mock",
    )
    assert (answered["status"], answered["error"], answered["attempts"], answered["stream"]) == (200, None, 1, False)
    assert answered["trace_id"] == "0af7651916cd43dd8448eb211c80319c"
    assert answered["client"] == "127.0.0.1"
    assert answered["completion_tokens"] == 5
    assert answered["prompt_tokens"] == 5  # the mock counts words: Say this is a test
    assert answered["cost_usd"] == pytest.approx(5 * 0.001 + 5 * 0.002)
    assert answered["guardrails"] == [{"policy": "guard", "stage": "input", "check": "regex", "verdict": "pass"}]
    assert answered["latency_ms"] > 0
    assert answered["prompt"] is None  # no bodies unless include_bodies
    assert answered["response"] is None

    denied = await record_of(http, gateway, "denied")
    assert (denied["status"], denied["error"], denied["deployment"], denied["key"]) == (
        400,
        "guardrail_violation",
        "mock",
        "alpha",
    )
    assert {"policy": "guard", "stage": "input", "check": "regex", "verdict": "deny"} in denied["guardrails"]
    assert denied["attempts"] is None  # refused before any upstream call

    streamed = await record_of(http, gateway, "streamed")
    assert (streamed["api"], streamed["deployment"], streamed["status"], streamed["stream"]) == (
        "chat",
        "other",
        200,
        True,
    )
    assert streamed["ttft_ms"] is not None
    assert 0 < streamed["ttft_ms"] <= streamed["latency_ms"]
    assert streamed["completion_tokens"] == 6

    limited = await record_of(http, gateway, "limited")
    assert (limited["status"], limited["error"], limited["key"], limited["deployment"]) == (
        429,
        "rate_limit_exceeded",
        "alpha",
        "mock",
    )

    unknown = await record_of(http, gateway, "unknown-key")
    assert (unknown["status"], unknown["error"], unknown["key"]) == (401, "invalid_api_key", None)


async def test_no_key_value_or_header_is_ever_stored(
    make_gateway: GatewayFactory, http: ClientSession, tmp_path: Path
) -> None:
    gateway = await make_gateway(logged_config(sqlite_url(tmp_path)), ENV)
    url = gateway.make_url("/v1/completions")
    body = {"model": "mock", "prompt": "hello", "max_tokens": 2}
    assert await post(http, url, ALPHA_KEY, "good-key", body) == 200
    assert await post(http, url, CANARY, "canary-key", body) == 401
    assert await post(http, url, BETA_KEY, "canary-header", body, **{"x-canary": CANARY}) == 200
    await wait_for_records(http, gateway, 3)

    stored = database_bytes(tmp_path)
    listed = str(await admin_get(http, gateway, "/admin/requests"))
    for secret in (ALPHA_KEY, BETA_KEY, CANARY, ADMIN_KEY):
        assert secret.encode() not in stored
        assert secret not in listed


async def test_bodies_are_kept_only_when_turned_on_redacted_and_cut(
    make_gateway: GatewayFactory, http: ClientSession, tmp_path: Path
) -> None:
    config = logged_config(sqlite_url(tmp_path), include_bodies=True, max_body_chars=40)
    config["deployments"][1]["provider"] = {"type": "mock", "reply": "write to bob@example.com today"}
    gateway = await make_gateway(config, ENV)
    prompt = "mail alice@example.com about the launch " + "and more " * 20
    body = {"model": "other", "prompt": prompt, "max_tokens": 16}
    assert await post(http, gateway.make_url("/v1/completions"), BETA_KEY, "with-bodies", body) == 200

    record = await record_of(http, gateway, "with-bodies")
    assert record["prompt"].startswith("mail ")
    assert "alice@example.com" not in record["prompt"]
    assert "about the launch" in record["prompt"]
    assert len(record["prompt"]) <= 60  # cut at 40 characters before the redaction's marker replaced the address
    assert record["response"] is not None
    assert "bob@example.com" not in record["response"]
    assert record["response"].startswith("write to ")


async def test_the_request_log_is_off_when_disabled_and_the_admin_api_says_so(
    make_gateway: GatewayFactory, http: ClientSession, tmp_path: Path
) -> None:
    config = logged_config(sqlite_url(tmp_path), enabled=False)
    gateway = await make_gateway(config, ENV)
    assert await post(http, gateway.make_url("/v1/completions"), BETA_KEY, "x", {"model": "mock", "prompt": "p"}) == 200

    for path in ("/admin/requests", "/admin/requests/x", "/admin/requests/stats", "/admin/requests/spend"):
        answer = await admin_get(http, gateway, path, expect=404)
        assert answer["error"]["code"] == "request_log_disabled"
    assert files_in(tmp_path) == []
    assert gateway.app[OBSERVABILITY].request_log is None  # nothing to call as a request ends
    assert REQUEST_LOG not in gateway.app


async def test_a_config_not_read_from_a_file_keeps_no_log_and_writes_no_file(
    make_gateway: GatewayFactory, http: ClientSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    config = logged_config("")
    del config["request_log"]
    gateway = await make_gateway(config, ENV)
    assert await post(http, gateway.make_url("/v1/completions"), BETA_KEY, "x", {"model": "mock", "prompt": "p"}) == 200

    answer = await admin_get(http, gateway, "/admin/requests", expect=404)
    assert answer["error"]["code"] == "request_log_disabled"
    assert files_in(tmp_path) == []


async def test_filters_and_pages_find_each_request_once_newest_first(
    make_gateway: GatewayFactory, http: ClientSession, tmp_path: Path
) -> None:
    gateway = await make_gateway(logged_config(sqlite_url(tmp_path)), ENV)
    url = gateway.make_url("/v1/completions")
    for index in range(12):
        deployment = "mock" if index % 3 else "other"
        status = await post(http, url, BETA_KEY, f"beta-{index:02d}", {"model": deployment, "prompt": "p"})
        assert status == 200
    assert await post(http, url, BETA_KEY, "bad-model", {"model": "nowhere", "prompt": "p"}) == 404
    await wait_for_records(http, gateway, 13)

    seen: list[str] = []
    cursor: str | None = None
    while True:
        after: dict[str, Any] = {"cursor": cursor} if cursor else {}
        page = await admin_get(http, gateway, "/admin/requests", limit=5, key="beta", status="2xx", **after)
        seen += [record["id"] for record in page["data"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [f"beta-{index:02d}" for index in reversed(range(12))]

    others = await admin_get(http, gateway, "/admin/requests", deployment="other", team="ads")
    assert [record["id"] for record in others["data"]] == ["beta-09", "beta-06", "beta-03", "beta-00"]
    not_found = await admin_get(http, gateway, "/admin/requests", status="404", model="nowhere")
    assert [(record["id"], record["error"]) for record in not_found["data"]] == [("bad-model", "model_not_found")]
    assert (await admin_get(http, gateway, "/admin/requests", error="model_not_found"))["data"] == not_found["data"]

    every = (await admin_get(http, gateway, "/admin/requests"))["data"]
    middle = every[6]["ts"]
    newer = (await admin_get(http, gateway, "/admin/requests", since=middle))["data"]
    older = (await admin_get(http, gateway, "/admin/requests", until=middle))["data"]
    assert newer + older == every  # `since` inclusive, `until` exclusive: one window's end is the next one's start
    assert every[6] in newer
    assert all(record["ts"] >= middle for record in newer)
    assert all(record["ts"] < middle for record in older)
    assert (await admin_get(http, gateway, "/admin/requests", since="4102444800"))["data"] == []  # 2100, epoch seconds


@pytest.mark.parametrize(
    ("params", "param"),
    [
        ({"status": "2xy"}, "status"),
        ({"limit": "0"}, "limit"),
        ({"limit": "501"}, "limit"),
        ({"since": "yesterday"}, "since"),
        ({"since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"}, "since"),
        ({"cursor": "not-a-cursor"}, "cursor"),
        ({"keys": "alpha"}, "keys"),
    ],
)
async def test_a_bad_filter_is_a_400_naming_it(
    make_gateway: GatewayFactory, http: ClientSession, tmp_path: Path, params: dict[str, str], param: str
) -> None:
    gateway = await make_gateway(logged_config(sqlite_url(tmp_path)), ENV)

    answer = await admin_get(http, gateway, "/admin/requests", expect=400, **params)

    assert answer["error"]["param"] == param
    assert answer["error"]["type"] == "invalid_request_error"


async def test_stats_and_spend_add_up_what_the_answers_said(
    make_gateway: GatewayFactory, http: ClientSession, tmp_path: Path
) -> None:
    gateway = await make_gateway(logged_config(sqlite_url(tmp_path)), ENV)
    costs: dict[str, float] = {"alpha": 0.0, "beta": 0.0}
    async with ClientSession() as client:
        for index, (key, name) in enumerate([(ALPHA_KEY, "alpha"), (BETA_KEY, "beta"), (BETA_KEY, "beta")] * 2):
            body = {"model": "mock" if index % 2 else "other", "prompt": "one two three", "max_tokens": 3 + index}
            async with client.post(
                gateway.make_url("/v1/completions"), json=body, headers=headers(key, f"s{index}")
            ) as answer:
                assert answer.status == 200
                costs[name] += float(answer.headers["x-gateway-cost-usd"])
    await wait_for_records(http, gateway, 6)

    spend = await admin_get(http, gateway, "/admin/requests/spend", group_by="key")
    assert spend["group_by"] == "key"
    by_key = {row["group"]: row for row in spend["data"]}
    assert by_key["beta"]["requests"] == 4
    assert by_key["alpha"]["cost_usd"] == pytest.approx(costs["alpha"])
    assert by_key["beta"]["cost_usd"] == pytest.approx(costs["beta"])
    assert [row["group"] for row in spend["data"]] == ["beta", "alpha"]  # most expensive first
    assert by_key["beta"]["completion_tokens"] == sum(3 + index for index in (1, 2, 4, 5))

    teams = await admin_get(http, gateway, "/admin/requests/spend", group_by="team")
    assert {row["group"]: row["requests"] for row in teams["data"]} == {"ads": 4, "search": 2}
    days = await admin_get(http, gateway, "/admin/requests/spend", group_by="day")
    assert len(days["data"]) == 1
    assert days["data"][0]["requests"] == 6

    csv = await admin_get(http, gateway, "/admin/requests/spend", group_by="deployment", format="csv")
    lines = csv.strip().splitlines()
    assert lines[0] == "group,requests,prompt_tokens,completion_tokens,cost_usd"
    assert {line.split(",")[0] for line in lines[1:]} == {"mock", "other"}
    assert sum(float(line.split(",")[4]) for line in lines[1:]) == pytest.approx(sum(costs.values()))

    stats = await admin_get(http, gateway, "/admin/requests/stats", bucket_s=3600)
    assert stats["bucket_s"] == 3600
    busy = [bucket for bucket in stats["buckets"] if bucket["requests"]]
    assert sum(bucket["requests"] for bucket in busy) == 6
    assert sum(bucket["errors"] for bucket in busy) == 0
    assert all(bucket["p50_ms"] <= bucket["p95_ms"] for bucket in busy)
    assert sum(bucket["cost_usd"] for bucket in busy) == pytest.approx(sum(costs.values()))


async def test_the_sdk_s_requests_are_found_by_their_request_id(
    make_gateway: GatewayFactory, http: ClientSession, tmp_path: Path
) -> None:
    gateway = await make_gateway(logged_config(sqlite_url(tmp_path)), ENV)
    async with openai.AsyncOpenAI(base_url=str(gateway.make_url("/v1")), api_key=BETA_KEY, max_retries=0) as sdk:
        raw = await sdk.completions.with_raw_response.create(model="mock", prompt="hi", max_tokens=2)
        request_id = raw.headers["x-request-id"]

    record = await record_of(http, gateway, request_id)

    assert (record["key"], record["status"], record["deployment"]) == ("beta", 200, "mock")


async def test_a_virtual_key_is_recorded_by_its_name_never_its_value(
    make_gateway: GatewayFactory, http: ClientSession, tmp_path: Path, upstream: FakeUpstream
) -> None:
    config = logged_config(sqlite_url(tmp_path))
    config["deployments"].append(deployment("remote", upstream_url(upstream)))
    config["virtual_keys"] = [{"name": "vk-team", "provider": "openai", "api_key": "${VK}"}]
    config["keys"][1]["virtual_keys"] = ["vk-team"]
    gateway = await make_gateway(config, {**ENV, "VK": CANARY})
    body = {"model": "remote", "prompt": "hi", "max_tokens": 2}
    assert (
        await post(
            http, gateway.make_url("/v1/completions"), BETA_KEY, "vk", body, **{"x-gateway-virtual-key": "vk-team"}
        )
        == 200
    )

    record = await record_of(http, gateway, "vk")

    assert upstream.received[-1].headers["Authorization"] == f"Bearer {CANARY}"  # the credential went upstream
    assert (record["virtual_key"], record["deployment"], record["provider"]) == ("vk-team", "remote", "openai")
    assert CANARY.encode() not in database_bytes(tmp_path)


async def test_a_client_s_own_request_id_finds_its_record_slashes_and_all(
    make_gateway: GatewayFactory, http: ClientSession, tmp_path: Path
) -> None:
    gateway = await make_gateway(logged_config(sqlite_url(tmp_path)), ENV)
    body = {"model": "mock", "prompt": "p"}
    assert await post(http, gateway.make_url("/v1/completions"), BETA_KEY, "batch/7:item=3", body) == 200
    await wait_for_records(http, gateway, 1)

    record = await admin_get(http, gateway, "/admin/requests/batch/7:item=3")

    assert (record["id"], record["key"]) == ("batch/7:item=3", "beta")
    assert await admin_get(http, gateway, "/admin/requests/batch%2F7:item=3") == record
    missing = await admin_get(http, gateway, "/admin/requests/batch%2F8", expect=404)
    assert missing["error"]["code"] == "not_found"
