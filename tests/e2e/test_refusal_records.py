"""Every request keeps who sent it: a request refused by a guardrail, a rate limit or a budget is
recorded with its key, its metadata and the deployment it was routed to, in the access log, the
metrics, the spend view and the dashboard; `unrouted` holds only those refused before a
deployment was chosen (bad JSON, a failed authentication, an unknown model)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aiohttp import ClientSession

from tests.conftest import GatewayFactory, deployment, upstream_url
from tests.support.fake_upstream import FakeUpstream
from tests.support.observability_helpers import log_lines, scrape, value

ALPHA_KEY = "gw-alpha-key-0123456789"
BUDGET_KEY = "gw-budget-key-0123456789"
ADMIN_KEY = "adm-" + "0123456789abcdef" * 3
ENV = {"ALPHA": ALPHA_KEY, "BUDGETED": BUDGET_KEY, "ADMIN": ADMIN_KEY}
METADATA = {"x-gateway-metadata": '{"feature": "search"}'}


def refusing_config(upstream: FakeUpstream, log: Path, redis: dict[str, str]) -> dict[str, Any]:
    return {
        "redis": redis,
        "deployments": [deployment("guarded", upstream_url(upstream), retries=0, policies=["deny"])],
        "policies": {"deny": {"input": [{"check": "regex", "pattern": "forbidden", "action": "deny"}]}},
        "keys": [
            {"name": "alpha", "key": "${ALPHA}", "metadata": {"team": "alpha"}, "limits": {"rpm": 1}},
            {"name": "budgeted", "key": "${BUDGETED}", "budget": {"tokens": 10, "period": "1d"}},
        ],
        "admin": {"key": "${ADMIN}"},
        "observability": {"access_log": {"path": str(log)}, "spend": {"metadata_keys": ["team", "feature"]}},
    }


async def test_refused_requests_keep_their_key_metadata_and_deployment_everywhere(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    http: ClientSession,
    tmp_path: Path,
    redis_settings: dict[str, str],
) -> None:
    log = tmp_path / "access.log"
    gateway = await make_gateway(refusing_config(upstream, log, redis_settings), ENV)
    url = gateway.make_url("/v1/completions")
    alpha = {"Authorization": f"Bearer {ALPHA_KEY}", **METADATA}
    budgeted = {"Authorization": f"Bearer {BUDGET_KEY}", **METADATA}
    sent: list[tuple[str, dict[str, str], Any, int]] = [
        ("denied", alpha, {"model": "guarded", "prompt": "a forbidden word"}, 400),  # input guardrail
        ("served", alpha, {"model": "guarded", "prompt": "fine"}, 200),
        ("limited", alpha, {"model": "guarded", "prompt": "fine"}, 429),  # rpm 1
        ("spent", budgeted, {"model": "guarded", "prompt": "fine " * 40, "max_tokens": 50}, 429),  # 10 tokens
        ("bad-json", alpha, b"{not json", 400),  # refused before routing: unrouted
        ("unknown-model", budgeted, {"model": "nowhere", "prompt": "x"}, 404),  # unrouted too
    ]
    for request_id, headers, body, status in sent:
        options: dict[str, Any] = {"data": body} if isinstance(body, bytes) else {"json": body}
        headers = {**headers, "x-request-id": request_id, "Content-Type": "application/json"}
        async with http.post(url, headers=headers, **options) as response:
            assert response.status == status, await response.text()

    lines = {line["request_id"]: line for line in await log_lines(log, len(sent))}
    for request_id, key, team, error in (
        ("denied", "alpha", "alpha", "guardrail_violation"),
        ("limited", "alpha", "alpha", "rate_limit_exceeded"),
        ("spent", "budgeted", None, "budget_exceeded"),
    ):
        line = lines[request_id]
        assert (line["key"], line["deployment"], line["provider"], line["error"]) == (key, "guarded", "openai", error)
        assert line["metadata"] == ({"team": team} if team else {}) | {"feature": "search"}
        assert "attempts" not in line  # refused before any upstream call: no count to state
    assert lines["limited"]["rate_limited"] == "key"
    assert lines["spent"]["budget_exceeded"] is True
    assert "deployment" not in lines["bad-json"]
    assert lines["bad-json"]["key"] == "alpha"
    assert lines["bad-json"]["metadata"] == {"team": "alpha", "feature": "search"}

    metrics = await scrape(http, str(gateway.make_url("/metrics")))
    assert value(metrics, "gateway_requests_total", deployment="guarded", status_class="4xx") == 3
    assert value(metrics, "gateway_requests_total", deployment="guarded", provider="openai") == 4
    assert value(metrics, "gateway_requests_total", deployment="unrouted") == 2
    for code in ("guardrail_violation", "rate_limit_exceeded", "budget_exceeded"):
        assert value(metrics, "gateway_request_errors_total", deployment="guarded", code=code, mid_stream="false") == 1

    async with http.get(gateway.make_url("/dashboard/data")) as response:
        rows = {row["name"]: row for row in (await response.json())["deployments"]}
    assert (rows["guarded"]["requests"], rows["guarded"]["rejected"]) == (4, 3)
    assert rows["unrouted"]["requests"] == 2

    admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
    spend: dict[str, dict[str, int]] = {}
    for group in ("key", "deployment", "metadata.team", "metadata.feature"):
        params = {"group_by": group, "period": "1d"}
        async with http.get(gateway.make_url("/admin/spend"), params=params, headers=admin) as response:
            assert response.status == 200
            spend[group] = {row["name"]: row["requests"] for row in (await response.json())["groups"]}
    assert spend["key"] == {"alpha": 4, "budgeted": 2}
    assert spend["deployment"] == {"guarded": 4, "unrouted": 2}
    assert spend["metadata.team"] == {"alpha": 4}
    assert spend["metadata.feature"] == {"search": 6}


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer gw-nobody-0123456789"}], ids=["none", "unknown"])
async def test_a_request_whose_caller_is_unknown_is_not_spent_by_anyone(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    http: ClientSession,
    tmp_path: Path,
    redis_settings: dict[str, str],
    headers: dict[str, str],
) -> None:
    log = tmp_path / "access.log"
    gateway = await make_gateway(refusing_config(upstream, log, redis_settings), ENV)
    body = {"model": "guarded", "prompt": "x"}
    async with http.post(gateway.make_url("/v1/completions"), json=body, headers={**headers, **METADATA}) as r:
        assert r.status == 401
    [line] = await log_lines(log, 1)
    assert "key" not in line
    assert "deployment" not in line
    admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
    params = {"group_by": "key", "period": "1d"}
    async with http.get(gateway.make_url("/admin/spend"), params=params, headers=admin) as response:
        assert (await response.json())["groups"] == []
