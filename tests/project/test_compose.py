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

from gateway.config.loader import load_config
from gateway.config.request_log import target as request_log_target
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


# What deploy/compose/keys.yaml's documented .env adds to what compose gives the gateway.
KEYS_ENV = {
    "GATEWAY_ADMIN_KEY": "3f9c2a7e5b1d08c46e2f9a3b7c5d1e08a4f6b2c9d7e3a1f5",
    "GATEWAY_METRICS_KEY": "9b7d5f3a1c8e6b4d2f0a9c7e5b3d1f8a",
    "GATEWAY_ENCRYPTION_KEY": "Pz0x2m9Yl3b6A9n1c5Q8d2R7e4S1f6T0g3U9h5V2i8I=",
    "OPENAI_API_KEY": "sk-test",
}


def unset(value: object) -> str:
    """A compose value with its `${VAR:-default}`s as compose reads them when VAR is unset."""
    return re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", str(value))


def gateway_environment() -> dict[str, str]:
    """What compose gives the gateway's process, no variable set in the shell or .env."""
    return {name: unset(value) for name, value in compose()["services"]["gateway"]["environment"].items()}


def test_the_keys_config_loads_with_the_documented_variables(tmp_path: Path) -> None:
    env = {**gateway_environment(), **KEYS_ENV}

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


@pytest.mark.parametrize("config_file", ["config.yaml", "deploy/compose/keys.yaml"])
@pytest.mark.parametrize("request_log_url", [None, "postgresql://gateway:secret@db:5432/gateway"])
def test_the_request_log_outlives_the_container_whichever_config_compose_mounts(
    config_file: str, request_log_url: str | None
) -> None:
    """Unset, REQUEST_LOG_URL puts SQLite on the `request-log` volume (the config's own folder is a
    read-only mount); set, it is the log's database."""
    gateway = compose()["services"]["gateway"]
    mounts = {target: source for source, target, *_ in (unset(volume).split(":") for volume in gateway["volumes"])}
    [folder] = [target for target, source in mounts.items() if source == "request-log"]
    env = {**gateway_environment(), **KEYS_ENV}
    if request_log_url:
        env["REQUEST_LOG_URL"] = request_log_url

    loaded = load_config(ROOT / config_file, env=env)
    kind, path = request_log_target(loaded.config.request_log, "/etc/gateway/config.yaml")  # where compose mounts it

    assert "request-log" in compose()["volumes"]  # named: `down` keeps it, `down -v` drops it
    if request_log_url:
        assert (kind, path) == ("postgresql", None)
    else:
        assert kind == "sqlite"
        assert path is not None
        assert path.parent == Path(folder)


def test_the_image_gives_its_user_the_request_log_folder() -> None:
    """A named volume starts as a copy of the image's folder, owner included: 10001 can write it."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    [folder] = [
        target
        for source, target, *_ in (unset(v).split(":") for v in compose()["services"]["gateway"]["volumes"])
        if source == "request-log"
    ]
    base = dockerfile.split(" AS base")[1].split("\nFROM ")[0]

    assert re.search(rf"install -d -o 10001 -g 10001 (-m 0?7[0-7]0 )?{re.escape(folder)}\b", base)
    assert set(re.findall(r"^USER (\S+)$", dockerfile, flags=re.MULTILINE)) == {"10001:10001"}


def test_the_compose_file_refers_only_to_what_it_declares() -> None:
    """What `docker compose config` checks, offline: every named volume, config and service a service
    refers to is declared, every bind-mounted file exists, every declared volume is used."""
    declared = compose()
    services = declared["services"]
    used_volumes = set()
    for name, service in services.items():
        for volume in service.get("volumes", []):
            source = unset(volume).split(":")[0]
            if source.startswith((".", "/")):
                assert (ROOT / source).exists(), f"{name}: {source} is not there"
            else:
                assert source in declared["volumes"], f"{name}: volume {source} is not declared"
                used_volumes.add(source)
        for config in service.get("configs", []):
            assert config["source"] in declared["configs"], f"{name}: config {config['source']}"
        for dependency in service.get("depends_on", []):
            assert dependency in services, f"{name} depends on {dependency}, which is not a service"
        if "build" in service:
            assert (ROOT / service["build"]["context"] / "Dockerfile").is_file()
    assert used_volumes == set(declared["volumes"])
