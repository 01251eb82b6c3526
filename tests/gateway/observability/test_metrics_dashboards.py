"""The Grafana dashboard and the compose stack: every query names series the gateway exports."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import ClientSession

from tests.conftest import GatewayFactory, deployment
from tests.support import fake_upstream
from tests.support.fake_upstream import FakeUpstream

ROOT = Path(__file__).resolve().parents[3]
DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "llm-gateway.json"
SERIES = re.compile(r"\bgateway_[a-z_]+\b")
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def queries() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]


def exported_names(scrape: str) -> set[str]:
    """Sample names in the scrape, and the families it declares (a counter not yet incremented)."""
    names = {line.split()[2] for line in scrape.splitlines() if line.startswith("# TYPE ")}
    names |= {re.split(r"[{ ]", line, maxsplit=1)[0] for line in scrape.splitlines() if line and line[0] != "#"}
    return names


def declared(name: str, names: set[str]) -> bool:
    base = next((name.removesuffix(s) for s in HISTOGRAM_SUFFIXES if name.endswith(s)), name)
    return name in names or base in names


async def test_every_dashboard_query_names_a_series_present_after_traffic(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession
) -> None:
    config: dict[str, Any] = {
        "routing": {"backoff": {"initial_s": 0.001, "max_s": 0.001}},
        "deployments": [
            deployment("fake", upstream.base_url, retries=1, policies=["cached"]),
            deployment("down", "http://127.0.0.1:9/v1", retries=0, fallbacks=["fake"]),
        ],
        "policies": {"cached": {"cache": {"ttl_s": 60}}},
    }
    gateway = await make_gateway(config)
    url = gateway.make_url("/v1/completions")
    upstream.script(fake_upstream.status(500))  # one retry
    for body in (
        {"model": "fake", "prompt": "a"},
        {"model": "fake", "prompt": "a"},  # a cache hit
        {"model": "fake", "prompt": "s", "stream": True},
        {"model": "down", "prompt": "f"},  # a fallback
    ):
        async with http.post(url, json=body) as response:
            assert response.status == 200
    async with http.get(gateway.make_url("/metrics")) as response:
        names = exported_names(await response.text())

    used = {name for expr in queries() for name in SERIES.findall(expr)}
    assert len(used) >= 14
    missing = sorted(name for name in used if not declared(name, names))
    assert missing == []
    for sample in ("gateway_requests_total", "gateway_retries_total", "gateway_fallbacks_total"):
        assert sample in names  # with values, not only declared


def test_the_dashboard_has_a_panel_for_each_thing_operators_watch() -> None:
    titles = " ".join(panel["title"].lower() for panel in json.loads(DASHBOARD.read_text())["panels"])
    for topic in ("traffic", "errors", "latency", "first token", "tokens", "cache hit", "guardrail", "circuit", "rate"):
        assert topic in titles


async def test_promtool_parses_every_dashboard_query() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian: apt-get install prometheus); scripts/test.sh installs it")
    rules = [
        {"record": f"dashboard:query_{index}", "expr": expr.replace("$__rate_interval", "1m")}
        for index, expr in enumerate(queries())
    ]
    checked = await asyncio.to_thread(
        subprocess.run,
        [promtool, "check", "rules", "/dev/stdin"],
        input=yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}).encode(),
        capture_output=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout.decode() + checked.stderr.decode()


def test_the_compose_stack_scrapes_the_gateway_and_provisions_the_dashboard() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert {"gateway", "redis", "prometheus", "grafana"} <= set(compose["services"])
    scrape = yaml.safe_load((ROOT / "deploy" / "prometheus" / "prometheus.yml").read_text())
    [job] = scrape["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    assert job["static_configs"][0]["targets"] == ["gateway:8080"]
    grafana_mounts = " ".join(compose["services"]["grafana"]["volumes"])
    assert "deploy/grafana/dashboards" in grafana_mounts
    assert "deploy/grafana/provisioning" in grafana_mounts
    datasource = yaml.safe_load((ROOT / "deploy/grafana/provisioning/datasources/prometheus.yml").read_text())
    uids = {panel["datasource"]["uid"] for panel in json.loads(DASHBOARD.read_text())["panels"]}
    assert uids == {datasource["datasources"][0]["uid"]}
