"""The console's files and the admin routes it adds: served only with the admin API, under a CSP
that forbids inline script and other origins; `GET /admin/deployments`; viewer keys in the config."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from aiohttp import ClientSession

from gateway.config.loader import ConfigError, parse_config
from tests.conftest import GatewayFactory
from tests.support.console_helpers import ADMIN_KEY, ENV, console_config
from tests.support.observability_helpers import once_redis_answers

STATIC = Path(__file__).resolve().parents[3] / "gateway" / "console" / "static"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}


async def test_the_console_is_served_under_a_csp_without_inline_script(
    make_gateway: GatewayFactory, redis_settings: dict[str, str], http: ClientSession
) -> None:
    gateway = await make_gateway(console_config(redis_settings), ENV)
    for path in ("/console", "/console/", "/console/static/app.js", "/console/static/console.css"):
        async with http.get(gateway.make_url(path)) as response:
            assert response.status == 200, path
            csp = response.headers["Content-Security-Policy"]
            assert "default-src 'self'" in csp
            assert "unsafe-inline" not in csp
            assert "unsafe-eval" not in csp
            assert "frame-ancestors 'none'" in csp
            assert response.headers["X-Content-Type-Options"] == "nosniff"
    async with http.get(gateway.make_url("/console/static/app.js")) as response:
        assert response.content_type == "text/javascript"
    for path in ("/console/static/../../app.py", "/console/static/%2e%2e%2fapp.py", "/console/static/nope.js"):
        async with http.get(gateway.make_url(path)) as response:
            assert response.status == 404, path


def test_the_pages_have_no_inline_script_style_or_handler() -> None:
    """What the CSP would block anyway, kept out of the files (the browser tests see it work)."""
    page = (STATIC / "index.html").read_text()
    assert not re.search(r"<script(?![^>]*\bsrc=)", page)
    assert not re.search(r"<style|\sstyle=|\son[a-z]+=", page)
    for script in STATIC.glob("*.js"):
        text = script.read_text().replace("http://www.w3.org/2000/svg", "")
        for banned in (
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "eval(",
            "document.write",
            "http://",
            "https://",
        ):
            assert banned not in text, (script.name, banned)


async def test_without_an_admin_key_there_is_no_console(
    make_gateway: GatewayFactory, redis_settings: dict[str, str], http: ClientSession
) -> None:
    config = console_config(redis_settings)
    del config["admin"]
    gateway = await make_gateway(config, ENV)
    for path in ("/console", "/console/static/app.js", "/admin/session"):
        async with http.get(gateway.make_url(path)) as response:
            assert response.status == 404, path


async def test_deployments_show_their_state_circuit_and_why_one_cannot_serve(
    make_gateway: GatewayFactory, redis_settings: dict[str, str], http: ClientSession
) -> None:
    config: dict[str, Any] = console_config(redis_settings)
    config["routing"] = {"breaker": {"consecutive_failures": 2}}
    config["deployments"] += [
        {"name": "failing", "retries": 0, "provider": {"type": "mock", "error_rate": 1.0, "error_status": 502}},
        {
            "name": "keyless",
            "provider": {"type": "openai", "base_url": "http://127.0.0.1:9/v1", "api_key": "${UNSET_OPENAI_KEY}"},
        },
    ]
    gateway = await make_gateway(config, ENV)
    async with http.post(gateway.make_url("/admin/keys"), json={"name": "caller"}, headers=ADMIN) as response:
        caller = {"Authorization": f"Bearer {(await response.json())['key']}"}
    for _ in range(3):
        body = {"model": "failing", "prompt": "x"}
        async with http.post(gateway.make_url("/v1/completions"), json=body, headers=caller) as response:
            assert response.status in (502, 503)
    status, report = await once_redis_answers(http, str(gateway.make_url("/admin/deployments")), ADMIN)
    assert status == 200
    rows = {row["name"]: row for row in report["data"]}
    assert rows["mock"]["state"] == "ready"
    assert rows["mock"]["reason"] is None
    assert rows["failing"]["state"] == "circuit_open"
    assert "circuit is open" in rows["failing"]["reason"]
    assert rows["keyless"]["state"] == "unavailable"
    assert "UNSET_OPENAI_KEY" in rows["keyless"]["reason"]
    assert report["redis"] == "ok"
    async with http.get(gateway.make_url("/admin/deployments")) as response:
        assert response.status == 401


def test_viewer_keys_are_environment_references_and_off_when_unset_or_weak() -> None:
    def load(viewers: list[dict[str, str]], env: dict[str, str]) -> Any:
        text = (
            "admin: {key: '${ADMIN_KEY}', viewer_keys: " + str(viewers).replace("'", '"') + "}\n"
            "deployments: [{name: m, provider: {type: mock}}]\n"
        )
        return parse_config(text, {"ADMIN_KEY": ADMIN_KEY, **env})

    with pytest.raises(ConfigError) as refused:
        load([{"name": "a", "key": "literal-viewer-key-0123456789abcdef"}], {})
    assert "admin.viewer_keys[0].key" in refused.value.report()
    assert "literal" not in refused.value.report()
    loaded = load(
        [{"name": "unset", "key": "${NOT_SET}"}, {"name": "weak", "key": "${WEAK}"}, {"name": "ok", "key": "${OK}"}],
        {"WEAK": "short", "OK": ENV["VIEWER_KEY"]},
    )
    assert list(loaded.viewer_keys) == ["ok"]
    warnings = "\n".join(loaded.warnings)
    assert "NOT_SET is not set" in warnings
    assert "('weak') is too weak" in warnings
    assert "short" not in warnings
    with pytest.raises(ConfigError) as twice:
        load([{"name": "a", "key": "${OK}"}, {"name": "a", "key": "${OK}"}], {"OK": ENV["VIEWER_KEY"]})
    assert "repeated: a" in twice.value.report()
