"""/dashboard in a real headless browser: live traffic, errors, percentiles, cache and breaker state.

`DASHBOARD_SCREENSHOT=docs/dashboard.png` keeps the screenshot (docs/observability.md shows it).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from aiohttp import ClientSession
from aiohttp.test_utils import TestServer

from tests.conftest import GatewayFactory, deployment
from tests.support.browser import headless_page
from tests.support.fake_upstream import FakeUpstream

METRICS_KEY = "dashboard-key-0123456789"
NONE = "\u2013"  # what the page shows where there is no value yet (an en dash)
ROW = "document.querySelector('tr[data-deployment=\"{name}\"] td.{cell}')?.textContent"


def config(upstream: FakeUpstream, **observability: Any) -> dict[str, Any]:
    return {
        "routing": {"breaker": {"consecutive_failures": 3}},
        "deployments": [
            deployment("fast", upstream.base_url, policies=["cached"]),
            deployment("slow", upstream.base_url),
            deployment("broken", "http://127.0.0.1:9/v1", retries=0),
        ],
        "policies": {"cached": {"cache": {"ttl_s": 60}}},
        "observability": observability,
    }


@contextlib.asynccontextmanager
async def traffic(gateway: TestServer) -> AsyncIterator[None]:
    """Requests flowing while the page is open: cache hits and misses, streams, failures."""

    async def run() -> None:
        async with ClientSession() as http:
            for i in itertools.count():
                for body in (
                    {"model": "fast", "prompt": f"p{i % 4}"},
                    {"model": "slow", "prompt": f"q{i}", "stream": i % 2 == 0},
                    {"model": "broken", "prompt": "x"} if i % 5 == 0 else {"model": "fast", "prompt": "p0"},
                ):
                    async with http.post(gateway.make_url("/v1/completions"), json=body) as response:
                        await response.read()
                await asyncio.sleep(0.02)

    task = asyncio.ensure_future(run())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_the_status_page_shows_live_traffic_errors_latency_cache_and_breakers(
    make_gateway: GatewayFactory, upstream: FakeUpstream, tmp_path: Path
) -> None:
    gateway = await make_gateway(config(upstream))
    async with traffic(gateway), headless_page(tmp_path / "profile", height=420) as page:
        await page.goto(str(gateway.make_url("/dashboard")))
        # The second poll turns totals into live rates over the window.
        live = "document.getElementById('window').textContent.startsWith('last')"
        await page.wait_for(f"{live} && {ROW.format(name='fast', cell='rps')} !== '{NONE}'")
        # The traffic has opened the broken deployment's circuit (its third failure comes at the 11th
        # round of requests: seen, as a loaded machine may take seconds for them).
        await page.wait_for(f"{ROW.format(name='broken', cell='circuit')} === 'open'")
        await asyncio.sleep(2.5)  # a few more polls: the sparklines fill in (for the screenshot)
        cells = {
            (name, cell): await page.evaluate(ROW.format(name=name, cell=cell))
            for name in ("fast", "slow", "broken")
            for cell in ("circuit", "rps", "requests", "errors", "p50", "p95", "p99", "hits")
        }
        screenshot = await page.screenshot()

    assert float(cells["fast", "rps"]) > 0
    assert int(cells["fast", "requests"].replace(",", "")) > 0
    assert cells["fast", "p50"].endswith(" ms")
    assert cells["fast", "p99"].endswith(" ms")
    assert float(cells["fast", "p50"].split()[0]) <= float(cells["fast", "p99"].split()[0])
    assert cells["fast", "hits"].endswith(" %")
    assert float(cells["fast", "hits"].split()[0]) > 50
    assert cells["fast", "errors"] == "0.0 %"
    assert cells["broken", "circuit"] == "open"
    assert cells["broken", "errors"] in ("100.0 %", NONE)  # all failed (or none in the window: circuit open, skipped)
    assert cells["fast", "circuit"] == cells["slow", "circuit"] == "closed"
    assert screenshot.startswith(b"\x89PNG")
    keep_screenshot(screenshot, Path(os.environ.get("DASHBOARD_SCREENSHOT") or tmp_path / "dashboard.png"))


def keep_screenshot(png: bytes, path: Path) -> None:
    path.write_bytes(png)


async def test_the_page_asks_for_the_metrics_key_when_one_is_set(
    make_gateway: GatewayFactory, upstream: FakeUpstream, tmp_path: Path
) -> None:
    gateway = await make_gateway(config(upstream, metrics={"key": "${METRICS_KEY}"}), {"METRICS_KEY": METRICS_KEY})
    async with (
        ClientSession() as http,
        http.post(gateway.make_url("/v1/completions"), json={"model": "fast", "prompt": "x"}) as response,
    ):
        assert response.status == 200
    async with headless_page(tmp_path / "profile") as page:
        await page.goto(str(gateway.make_url("/dashboard")))
        await page.wait_for("getComputedStyle(document.getElementById('auth')).display === 'block'")
        assert await page.evaluate("document.getElementById('rows').children.length") == 0  # nothing shown
        await page.evaluate(f"document.getElementById('key').value = '{METRICS_KEY}'")
        await page.evaluate("document.getElementById('save').click()")
        requests = await page.wait_for(ROW.format(name="fast", cell="requests"))
    assert requests == "1"


async def test_the_first_view_already_shows_the_last_minute_and_asks_for_no_icon(
    make_gateway: GatewayFactory, upstream: FakeUpstream, tmp_path: Path
) -> None:
    gateway = await make_gateway(config(upstream, dashboard={"sample_s": 0.05}))
    async with ClientSession() as http:
        for prompt in ("a", "b", "c"):
            async with http.post(gateway.make_url("/v1/completions"), json={"model": "slow", "prompt": prompt}) as r:
                assert r.status == 200
        # The server keeps snapshots of these totals, one each 0.05 s: once it has one (seen, not
        # timed: a loaded machine samples late), the data carries a baseline.
        async with asyncio.timeout(30):  # a bound for a hang, not a speed
            while True:
                async with http.get(gateway.make_url("/dashboard/data")) as response:
                    data = await response.json()
                if data["baseline"] is not None:
                    break
                await asyncio.sleep(0.05)
    assert data["time"] - data["baseline"]["time"] <= 60

    async with headless_page(tmp_path / "profile") as page:
        await page.goto(str(gateway.make_url("/dashboard")))
        # Rates over a window from the first poll: its baseline is the server's (the page used to
        # need a second poll, two seconds later, and showed dashes until then).
        window = await page.wait_for(
            "document.getElementById('window').textContent.startsWith('last') && "
            "document.getElementById('window').textContent"
        )
        from_server = await page.evaluate("history[0].from_server === true")
        requests = await page.evaluate(ROW.format(name="slow", cell="requests"))
        icon = await page.evaluate("document.querySelector('link[rel=icon]').href")
    assert window.startswith("last ")
    assert from_server
    assert requests == "3"
    assert icon.startswith("data:")  # no request for /favicon.ico, so no 404 in the console
