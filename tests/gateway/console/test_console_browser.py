"""The console in Debian's chromium (Playwright), against the real gateway on loopback with a real
Redis: sign in, create a key and call the mock deployment with it, edit its limits, revoke it;
hostile values shown as text; forged and cross-site changes refused; a viewer who changes nothing.
The request log's pages have their own file (tests/gateway/console/test_console_log_browser.py)."""

from __future__ import annotations

import re
from typing import Any

from aiohttp import ClientSession, web
from aiohttp.test_utils import TestServer
from pytest_aiohttp import AiohttpServer

from tests.conftest import GatewayFactory
from tests.support.console_browser import console_page, sign_in, text_of
from tests.support.console_helpers import ADMIN_KEY, ENV, VIEWER_KEY, console_config

ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
HOSTILE = ["<img src=x onerror=alert(1)>", "<script>alert(2)</script>", '"><svg onload=alert(3)>']


async def complete(http: ClientSession, gateway: TestServer, key: str) -> int:
    body = {"model": "mock", "prompt": "hello from the console test", "max_tokens": 4}
    async with http.post(
        gateway.make_url("/v1/completions"), json=body, headers={"Authorization": f"Bearer {key}"}
    ) as response:
        await response.read()
        return response.status


async def keys(http: ClientSession, gateway: TestServer) -> dict[str, dict[str, Any]]:
    async with http.get(gateway.make_url("/admin/keys"), headers=ADMIN) as response:
        return {record["name"]: record for record in (await response.json())["data"]}


def base(gateway: TestServer) -> str:
    return str(gateway.make_url("")).rstrip("/")


ROW = "#keys-table tr:has(.key-name:text-is('{name}'))"


async def test_sign_in_create_a_key_use_it_edit_its_limits_and_revoke_it(
    make_gateway: GatewayFactory, redis_settings: dict[str, str], http: ClientSession
) -> None:
    gateway = await make_gateway(console_config(redis_settings), ENV)
    async with console_page() as watched:
        page = watched.page
        await sign_in(page, base(gateway), ADMIN_KEY)
        assert await page.text_content("#whoami") == "Signed in: admin"
        assert await page.evaluate("document.cookie") == ""  # HttpOnly: no script on the page can read it
        await page.click("nav a[data-page=keys]")
        await page.fill("#new-name", "browser-key")
        await page.fill("#new-budget-tokens", "1000")
        await page.fill("#new-metadata", "team=blue")
        await page.click("#key-create-submit")
        value = await text_of(page, "#new-key-value")
        assert value is not None
        assert value.startswith("gw-")
        await page.click("#new-key-dismiss")
        assert await page.locator("#new-key-value").count() == 0  # shown once: gone once dismissed
        assert value not in await page.content()

        assert await complete(http, gateway, value) == 200  # the new key works against the mock deployment
        row = page.locator(ROW.format(name="browser-key"))
        await row.locator("button:text-is('Usage')").click()
        tokens = await page.locator("#usage-tokens").text_content()
        assert tokens is not None
        assert re.match(r"Tokens: [1-9][\d,]* of 1,000", tokens), tokens  # usage against the budget

        await row.locator("button:text-is('Edit')").click()
        await page.fill("#edit-rpm", "1")
        await page.click("#edit-save")
        await page.wait_for_selector(f"{ROW.format(name='browser-key')} td:text-is('rpm 1')")
        assert [await complete(http, gateway, value) for _ in range(2)] == [200, 429]

        await page.reload()  # the session outlives a reload: no sign-in form
        await page.wait_for_selector("#whoami:has-text('Signed in')")
        await page.click("nav a[data-page=keys]")
        row = page.locator(ROW.format(name="browser-key"))
        await row.locator("button:text-is('Revoke')").click()
        await row.locator("button:text-is('Confirm: revoke')").click()
        await page.wait_for_selector(f"{ROW.format(name='browser-key')} .status:text-is('revoked')")
        assert await complete(http, gateway, value) == 401

        await page.click("#signout")
        await page.wait_for_selector("#signin-key")
        status = await page.evaluate("fetch('/admin/keys').then(r => r.status)")
        assert status == 401  # signed out: the cookie is gone
        watched.assert_clean()


async def test_hostile_metadata_renders_as_text(
    make_gateway: GatewayFactory, redis_settings: dict[str, str], http: ClientSession
) -> None:
    gateway = await make_gateway(console_config(redis_settings), ENV)
    metadata = {f"field{i}": text for i, text in enumerate(HOSTILE)}
    async with http.post(
        gateway.make_url("/admin/keys"), headers=ADMIN, json={"name": "markup", "metadata": metadata}
    ) as response:
        assert response.status == 201
    async with console_page() as watched:
        page = watched.page
        await sign_in(page, base(gateway), ADMIN_KEY)
        await page.goto(f"{base(gateway)}/console#/keys")
        cell = await page.locator(ROW.format(name="markup")).locator("td").nth(7).text_content()
        assert cell == "; ".join(f"{name}={text}" for name, text in metadata.items())  # the characters, as given
        await page.locator(ROW.format(name="markup")).locator("button:text-is('Edit')").click()
        assert await page.input_value("#edit-metadata") == "\n".join(f"{k}={v}" for k, v in metadata.items())
        injected = await page.evaluate("document.querySelectorAll('main img, main script, main svg[onload]').length")
        assert injected == 0
        watched.assert_clean()


def attacker_site(target: str) -> web.Application:
    """Another site's page that tries to create a key through the console's session: a form post
    (text/plain, shaped as JSON) and a credentialed fetch, both cross-site."""
    page = f"""<!doctype html><html><body>
<form id="f" method="POST" action="{target}/admin/keys" enctype="text/plain">
<input name='{{"name":"csrf-form","x":"' value='"}}'></form>
<script>
fetch("{target}/admin/keys", {{method: "POST", mode: "no-cors", credentials: "include",
  headers: {{"Content-Type": "text/plain"}}, body: '{{"name":"csrf-fetch"}}'}})
  .finally(() => document.getElementById("f").submit());
</script></body></html>"""

    async def serve(request: web.Request) -> web.Response:
        return web.Response(text=page, content_type="text/html")

    app = web.Application()
    app.router.add_get("/", serve)
    return app


async def test_changes_without_the_csrf_token_or_from_another_site_change_nothing(
    make_gateway: GatewayFactory, redis_settings: dict[str, str], http: ClientSession, aiohttp_server: AiohttpServer
) -> None:
    gateway = await make_gateway(console_config(redis_settings), ENV)
    attacker = await aiohttp_server(attacker_site(base(gateway)))
    async with console_page() as watched:
        page = watched.page
        await sign_in(page, base(gateway), ADMIN_KEY)
        forged = await page.evaluate(
            """Promise.all([{}, {"x-gateway-csrf": "forged"}].map((extra) => fetch("/admin/keys", {
                 method: "POST", headers: {"Content-Type": "application/json", ...extra},
                 body: JSON.stringify({name: "forged"})}).then((r) => r.status)))"""
        )
        assert forged == [403, 403]
        # "localhost" is another site than "127.0.0.1": its page gets no SameSite=Strict cookie sent.
        await page.goto(f"http://localhost:{attacker.port}/")
        await page.wait_for_url(re.compile(r".*/admin/keys$"))
        assert "missing_admin_key" in await page.content()
    assert await keys(http, gateway) == {}


async def test_a_viewer_sees_the_keys_and_can_change_nothing(
    make_gateway: GatewayFactory, redis_settings: dict[str, str], http: ClientSession
) -> None:
    gateway = await make_gateway(console_config(redis_settings), ENV)
    async with http.post(gateway.make_url("/admin/keys"), headers=ADMIN, json={"name": "watched"}) as response:
        assert response.status == 201
    async with console_page() as watched:
        page = watched.page
        await sign_in(page, base(gateway), VIEWER_KEY)
        assert await page.text_content("#whoami") == "Signed in: viewer auditor (read-only)"
        await page.click("nav a[data-page=keys]")
        row = page.locator(ROW.format(name="watched"))
        await row.wait_for()
        assert not await page.locator("#key-create").is_visible()
        assert not await row.locator("button:text-is('Revoke')").is_visible()
        await row.locator("button:text-is('Usage')").click()  # reading is theirs
        await page.wait_for_selector("#key-usage")
        statuses = await page.evaluate(
            """fetch("/admin/session").then((r) => r.json()).then((s) => Promise.all([
                 fetch("/admin/keys/watched/revoke", {method: "POST", headers: {"x-gateway-csrf": s.csrf_token}}),
                 fetch("/admin/keys", {method: "POST", headers: {"x-gateway-csrf": s.csrf_token,
                   "Content-Type": "application/json"}, body: JSON.stringify({name: "by-viewer"})}),
               ]).then((answers) => answers.map((a) => a.status)))"""
        )
        assert statuses == [403, 403]
        await page.click("nav a[data-page=deployments]")
        await page.wait_for_selector("#deployments-table .deployment-name:text-is('mock')")
        assert await page.text_content("#deployments-table .status") == "ready"
        watched.assert_clean()
    listed = await keys(http, gateway)
    assert list(listed) == ["watched"]
    assert listed["watched"]["status"] == "active"
