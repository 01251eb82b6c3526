"""docker compose and the image, checked offline (no docker daemon here): what a newcomer trying keys
relies on, Redis that keeps its data, a health check that follows the port, a small build context."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.test_serve_process import free_port, wait_until_listening
from tests.gateway.config.test_cli import GATEWAY, run_gateway

ROOT = Path(__file__).resolve().parents[2]


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return loaded


def test_redis_keeps_keys_budgets_and_spend_on_a_named_volume() -> None:
    redis = compose()["services"]["redis"]

    command = redis["command"]
    assert command[command.index("--appendonly") + 1] == "yes"
    assert "--save" not in command or command[command.index("--save") + 1] != ""
    [volume] = redis["volumes"]
    name, _, target = volume.partition(":")
    assert target == "/data"
    assert name in compose()["volumes"]


def test_prometheus_sends_the_metrics_key_that_the_keys_config_requires() -> None:
    services = compose()["services"]
    prometheus = yaml.safe_load((ROOT / "deploy" / "prometheus" / "prometheus.yml").read_text())
    [scrape] = prometheus["scrape_configs"]
    [mounted] = services["prometheus"]["configs"]

    assert scrape["authorization"]["credentials_file"] == mounted["target"]
    assert compose()["configs"][mounted["source"]]["content"] == "${GATEWAY_METRICS_KEY:-}"
    assert services["gateway"]["environment"]["GATEWAY_METRICS_KEY"] == "${GATEWAY_METRICS_KEY:-}"
    keys_config = yaml.safe_load((ROOT / "deploy" / "compose" / "keys.yaml").read_text())
    assert keys_config["observability"]["metrics"]["key"] == "${GATEWAY_METRICS_KEY}"


def test_the_keys_config_loads_with_the_documented_variables(tmp_path: Path) -> None:
    env = {
        "REDIS_URL": "redis://redis:6379/0",
        "GATEWAY_ADMIN_KEY": "3f9c2a7e5b1d08c46e2f9a3b7c5d1e08a4f6b2c9d7e3a1f5",
        "GATEWAY_METRICS_KEY": "9b7d5f3a1c8e6b4d2f0a9c7e5b3d1f8a",
        "GATEWAY_ENCRYPTION_KEY": "Pz0x2m9Yl3b6A9n1c5Q8d2R7e4S1f6T0g3U9h5V2i8I=",
        "OPENAI_API_KEY": "sk-test",
    }

    checked = run_gateway("check-config", str(ROOT / "deploy" / "compose" / "keys.yaml"), env=env)

    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "admin API is off" not in checked.stdout
    assert "UNAVAILABLE" not in checked.stdout
    assert "GATEWAY_ENCRYPTION_KEY is not set" not in checked.stdout


def _health_check_code() -> str:
    dockerfile = (ROOT / "Dockerfile").read_text()
    match = re.search(r"HEALTHCHECK [^\n]*\\\n\s*CMD (\[.*\])", dockerfile)
    assert match is not None
    command = json.loads(match.group(1))
    assert command[:2] == ["python", "-c"]
    return str(command[2])


async def test_the_image_health_check_follows_the_port_gateway_serve_reads(tmp_path: Path) -> None:
    port = free_port()
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"deployments": [{"name": "mock", "provider": {"type": "mock"}}]}))
    env = {**os.environ, "GATEWAY_PORT": str(port), "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(  # noqa: S603, ASYNC220 - the image's command, without --port
        [str(GATEWAY), "serve", "-c", str(config), "--host", "127.0.0.1", "--log-level", "WARNING"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    code = _health_check_code()
    try:
        await wait_until_listening(port, process)
        healthy = await asyncio.to_thread(_check, code, port)
        elsewhere = await asyncio.to_thread(_check, code, free_port())
    finally:
        process.send_signal(signal.SIGTERM)
        await asyncio.to_thread(process.wait, 10)

    assert healthy == 0
    assert elsewhere != 0


def _check(code: str, port: int) -> int:
    env = {**os.environ, "GATEWAY_PORT": str(port)}
    command = [sys.executable, "-c", code]  # the Dockerfile's own health check
    return subprocess.run(command, env=env, capture_output=True, timeout=30, check=False).returncode  # noqa: S603


def _allowed_in_context() -> set[str]:
    """The .dockerignore allow-list: `*`, then `!NAME` lines for what the build may see."""
    lines = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()]
    patterns = [line for line in lines if line and not line.startswith("#")]
    assert patterns[0] == "*"
    return {pattern[1:] for pattern in patterns if pattern.startswith("!")}


def test_the_build_context_holds_what_the_dockerfile_copies_and_nothing_heavy() -> None:
    allowed = _allowed_in_context()
    copied = {
        source
        for line in (ROOT / "Dockerfile").read_text().splitlines()
        if line.startswith("COPY ") and "--from" not in line
        for source in line.split()[1:-1]
    }

    assert copied
    assert copied <= allowed, copied - allowed
    for heavy in (".venv", ".venv-tools", ".clients", "build", "tests", ".git", "docs"):
        assert heavy not in allowed


@pytest.mark.parametrize("service", ["gateway"])
def test_the_gateway_publishes_and_serves_the_same_port(service: str) -> None:
    gateway = compose()["services"][service]

    [ports] = gateway["ports"]
    assert ports == "${GATEWAY_PORT:-8080}:${GATEWAY_PORT:-8080}"
    assert gateway["environment"]["GATEWAY_PORT"] == "${GATEWAY_PORT:-8080}"
    assert "--port" not in " ".join(gateway["command"])  # gateway serve reads GATEWAY_PORT
    assert "test" not in gateway["healthcheck"]  # the image's own check, which follows the port
