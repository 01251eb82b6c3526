"""The console's request-log pages in Debian's chromium (Playwright), on the request log's admin API
(GET /admin/requests, /{id}, /stats, /spend): a new key's requests found by filter and by request
id within seconds, its spend on the chart and in the CSV, the overview's totals; and a hostile
prompt, metadata and model name shown as the characters they are."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer
from playwright.async_api import Page

from tests.conftest import GatewayFactory
from tests.support.console_browser import console_page, sign_in, text_of
from tests.support.console_helpers import ADMIN_KEY, ENV, console_config

ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
PROMPT_SCRIPT = "<script>alert('prompt')</script> and <img src=x onerror=alert(5)>"
TEAM_MARKUP = "<img src=x onerror=alert(1)>"
MODEL_MARKUP = '"><svg onload=alert(2)>'
ROWS = "#request-table tbody tr:has(a.request-link)"


@pytest.fixture
def log_config(redis_settings: dict[str, str], tmp_path: Path) -> dict[str, Any]:
    config = console_config(redis_settings)
    config["request_log"] = {"url": f"sqlite:///{tmp_path}/requests.db", "include_bodies": True}
    return config


def base(gateway: TestServer) -> str:
    return str(gateway.make_url("")).rstrip("/")


def usd(value: float) -> str:
    """The page's own format (gateway/console/static/dom.js `usd`)."""
    if value == 0:
        return "$0"
    return "$" + f"{value:.{2 if value >= 1 else 4 if value >= 0.01 else 6}f}"


async def complete(
    http: ClientSession, gateway: TestServer, key: str, *, prompt: str = "hello log", **extra: Any
) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {key}", **extra.pop("headers", {})}
    body = {"model": "mock", "prompt": prompt, "max_tokens": 4, **extra}
    async with http.post(gateway.make_url("/v1/completions"), json=body, headers=headers) as response:
        await response.read()
        return response.status, response.headers["x-request-id"]


async def search(page: Page, rows: int, **filters: str) -> None:
    """Fill the filters and search until `rows` rows show (records reach the log within seconds)."""
    await page.goto(page.url.split("#")[0] + "#/requests")
    for name, value in filters.items():
        await page.fill(f"#filter-{name}", value)
    for _ in range(50):
        await page.click("#filter-apply")
        await page.wait_for_selector("#request-table")
        if await page.locator(ROWS).count() >= rows:
            return
        await page.wait_for_timeout(200)
    raise AssertionError(f"fewer than {rows} rows for {filters}")


async def test_a_keys_requests_are_found_by_filter_and_id_and_its_spend_is_on_the_chart_and_in_the_csv(
    make_gateway: GatewayFactory, log_config: dict[str, Any], http: ClientSession
) -> None:
    gateway = await make_gateway(log_config, ENV)
    async with console_page() as watched:
        page = watched.page
        await sign_in(page, base(gateway), ADMIN_KEY)
        await page.click("nav a[data-page=keys]")
        await page.fill("#new-name", "log-key")
        await page.fill("#new-metadata", "team=blue")
        await page.click("#key-create-submit")
        key = await text_of(page, "#new-key-value")
        assert key is not None
        answers = [await complete(http, gateway, key, prompt=f"question {i}") for i in range(3)]
        assert [status for status, _ in answers] == [200, 200, 200]

        await search(page, 3, key="log-key")
        assert await page.locator(ROWS).count() == 3
        statuses = await page.locator(f"{ROWS} .status").all_text_contents()
        assert statuses == ["200 ok"] * 3  # in words, not only a colour
        assert set(await page.locator(f"{ROWS} td:nth-child(5)").all_text_contents()) == {"blue"}

        request_id = answers[1][1]
        await search(page, 1, request_id=request_id)
        assert await page.locator(ROWS).all_text_contents() != []
        assert await page.locator(f"{ROWS} a.request-link").all_text_contents() == [request_id]
        await page.click(f"{ROWS} a.request-link")
        assert await text_of(page, "#request-id") == request_id
        detail = await page.text_content("#request-detail")
        assert detail is not None
        assert "log-key" in detail
        assert "mock" in detail
        assert await page.text_content("#request-prompt") == "question 1"

        async with http.get(gateway.make_url("/admin/requests/spend?group_by=key"), headers=ADMIN) as response:
            spent = {row["group"]: row for row in (await response.json())["data"]}["log-key"]
        assert spent["requests"] == 3
        assert spent["cost_usd"] > 0
        await page.goto(f"{base(gateway)}/console#/spend?group_by=key")
        bar = await text_of(page, '#spend-chart g[data-group="log-key"]')
        assert bar is not None
        assert f"{usd(spent['cost_usd'])}, 3 req" in bar
        exported = await page.evaluate("fetch(document.getElementById('spend-csv').href).then((r) => r.text())")
        rows = {row["group"]: row for row in csv.DictReader(io.StringIO(exported))}
        assert int(rows["log-key"]["requests"]) == 3
        assert float(rows["log-key"]["cost_usd"]) == pytest.approx(spent["cost_usd"])

        await page.click("nav a[data-page=overview]")
        total = await text_of(page, "#total-requests")
        assert total is not None
        assert int(total.replace(",", "")) >= 3
        assert await page.locator("#chart-latency path.line").count() == 2  # p50 and p95 drawn
        watched.assert_clean()


async def test_a_hostile_prompt_metadata_and_model_render_as_text(
    make_gateway: GatewayFactory, log_config: dict[str, Any], http: ClientSession
) -> None:
    gateway = await make_gateway(log_config, ENV)
    async with http.post(gateway.make_url("/admin/keys"), headers=ADMIN, json={"name": "plain"}) as response:
        key = (await response.json())["key"]
    metadata = {"x-gateway-metadata": orjson.dumps({"team": TEAM_MARKUP}).decode()}
    status, _ = await complete(http, gateway, key, prompt=PROMPT_SCRIPT, headers=metadata)
    assert status == 200
    await complete(http, gateway, key, model=MODEL_MARKUP)
    async with console_page() as watched:
        page = watched.page
        await sign_in(page, base(gateway), ADMIN_KEY)
        await search(page, 1, team=TEAM_MARKUP)
        assert await page.locator(f"{ROWS} td:nth-child(5)").all_text_contents() == [TEAM_MARKUP]
        await page.click(f"{ROWS} a.request-link")
        await page.wait_for_selector("#request-prompt")
        assert await page.text_content("#request-prompt") == PROMPT_SCRIPT
        await search(page, 1, model=MODEL_MARKUP)
        assert await page.locator(f"{ROWS} td:nth-child(7)").all_text_contents() == [MODEL_MARKUP]
        await page.goto(f"{base(gateway)}/console#/spend?group_by=team")
        assert await text_of(page, f'#spend-chart g[data-group="{TEAM_MARKUP}"] text.label') == TEAM_MARKUP
        injected = await page.evaluate(
            "document.querySelectorAll('main img, main script, main svg[onload], main [onerror]').length"
        )
        assert injected == 0
        watched.assert_clean()
