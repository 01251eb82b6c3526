"""Claude Code's and Codex's example settings against `gateway serve`. Always: every URL, key and
model they set is what the gateway serves (its default address; model ids that are deployments or
aliases of the config they go with, answered through the API the CLI speaks). With the CLIs
installed (scripts/test.sh puts them in .clients/; skipped, saying so, without them): each CLI run
in print mode with nothing but the example's settings, on a fresh home, its call in the gateway's
access log."""

from __future__ import annotations

import json
import os
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
import yaml

from tests.support import examples_catalog as catalog
from tests.support.gateway_process import ServedGateway, serve

KEY = "gw-examples-key-0123456789abcdef"
CLIENTS = catalog.ROOT / ".clients"
CLAUDE = CLIENTS / "claude-code" / "node_modules" / ".bin" / "claude"
CODEX = CLIENTS / "codex" / "node_modules" / ".bin" / "codex"
CLI_TIMEOUT_S = 240


def served_models(config: Path) -> set[str]:
    deployments = yaml.safe_load(config.read_text())["deployments"]
    return {name for deployment in deployments for name in [deployment["name"], *deployment.get("aliases", [])]}


def access_log(gateway: ServedGateway, path: str) -> list[dict[str, Any]]:
    lines = [line for line in gateway.log().splitlines() if line.startswith("{")]
    return [record for record in map(json.loads, lines) if record.get("path") == path]


@pytest.fixture(scope="module")
def claude_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedGateway]:
    """examples/claude-code/gateway.yaml as written, its key from the environment."""
    log = tmp_path_factory.mktemp("claude-gateway") / "gateway.log"
    with serve(catalog.CLAUDE_CODE_GATEWAY, log, {"GATEWAY_API_KEY": KEY}) as served:
        yield served


@pytest.fixture(scope="module")
def quickstart_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedGateway]:
    """The shipped config.yaml, as the quick start serves it (no keys; no Redis: state in memory)."""
    log = tmp_path_factory.mktemp("quickstart-gateway") / "gateway.log"
    with serve(catalog.ROOT / "config.yaml", log, {"REDIS_URL": ""}) as served:
        yield served


def claude_settings() -> dict[str, Any]:
    settings: dict[str, Any] = json.loads(catalog.CLAUDE_CODE_SETTINGS.read_text())
    return settings


def test_claude_code_s_settings_point_at_the_gateway_and_name_its_deployments(claude_gateway: ServedGateway) -> None:
    env = claude_settings()["env"]
    server = yaml.safe_load(catalog.CLAUDE_CODE_GATEWAY.read_text())["server"]
    models = {value for variable, value in env.items() if variable.endswith("_MODEL")}

    assert env["ANTHROPIC_BASE_URL"] == f"http://{server['host']}:{server['port']}"  # the root: Claude adds /v1
    assert env["ANTHROPIC_BASE_URL"] == catalog.DEFAULT_URL.removesuffix("/v1")
    assert {"ANTHROPIC_MODEL", "ANTHROPIC_DEFAULT_HAIKU_MODEL"} <= env.keys()
    assert models <= served_models(catalog.CLAUDE_CODE_GATEWAY)
    client = anthropic.Anthropic(base_url=claude_gateway.root, auth_token=KEY, max_retries=0)
    for model in sorted(models):  # answered in Anthropic's shape, as Claude Code reads it
        message = client.messages.create(model=model, max_tokens=16, messages=[{"role": "user", "content": "hi"}])
        assert message.content[0].type == "text"
        assert message.content[0].text.strip()


@pytest.mark.parametrize(("environment", "sent"), [({"GATEWAY_API_KEY": KEY}, KEY), ({}, catalog.DEFAULT_KEY)])
def test_claude_code_s_key_helper_sends_the_gateway_key(environment: dict[str, str], sent: str) -> None:
    helper = claude_settings()["apiKeyHelper"]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **environment}

    result = subprocess.run(  # noqa: S603 - the example's own command, run as Claude Code runs it
        ["/bin/sh", "-c", helper], capture_output=True, text=True, env=env, timeout=30, check=True
    )

    assert result.stdout == f"{sent}\n"


@pytest.mark.skipif(not CLAUDE.exists(), reason=f"Claude Code is not installed at {CLAUDE} (scripts/test.sh does)")
def test_claude_code_answers_through_the_gateway_with_the_example_settings(
    claude_gateway: ServedGateway, tmp_path: Path
) -> None:
    settings = claude_settings()
    settings["env"]["ANTHROPIC_BASE_URL"] = claude_gateway.root  # the test's port; all else as written
    home, work = tmp_path / "home", tmp_path / "work"
    (home / ".claude").mkdir(parents=True)
    work.mkdir()
    (home / ".claude" / "settings.json").write_text(json.dumps(settings))
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "GATEWAY_API_KEY": KEY}
    earlier = len(access_log(claude_gateway, "/v1/messages"))

    result = subprocess.run(  # noqa: S603 - the pinned CLI
        [str(CLAUDE), "-p", "Say hello", "--max-turns", "2"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        check=False,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip()
    calls = access_log(claude_gateway, "/v1/messages")[earlier:]
    assert calls
    assert {(call["status"], call["key"], call["deployment"]) for call in calls} == {(200, "claude-code", "coder")}
    assert "retired" not in result.stdout + result.stderr  # the ids it is pinned to are current ones


def codex_config() -> dict[str, Any]:
    with catalog.CODEX_CONFIG.open("rb") as file:
        return tomllib.load(file)


def test_codex_s_config_points_at_the_gateway_and_names_a_deployment_it_serves(
    quickstart_gateway: ServedGateway,
) -> None:
    config = codex_config()
    provider = config["model_providers"][config["model_provider"]]

    assert provider["base_url"] == catalog.DEFAULT_URL
    assert provider["env_key"] == "GATEWAY_API_KEY"
    assert provider["wire_api"] == "responses"
    assert config["model"] in served_models(catalog.ROOT / "config.yaml")
    client = openai.OpenAI(base_url=quickstart_gateway.url, api_key=catalog.DEFAULT_KEY, max_retries=0)
    with client.responses.stream(model=config["model"], input="Say hello") as stream:  # as Codex calls it
        response = stream.get_final_response()
    assert response.status == "completed"
    assert response.output_text.strip()


@pytest.mark.skipif(not CODEX.exists(), reason=f"the Codex CLI is not installed at {CODEX} (scripts/test.sh does)")
def test_codex_answers_through_the_gateway_with_the_example_config(
    quickstart_gateway: ServedGateway, tmp_path: Path
) -> None:
    home, work = tmp_path / "codex-home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (home / "config.toml").write_text(catalog.CODEX_CONFIG.read_text())
    base_url = f"model_providers.{codex_config()['model_provider']}.base_url={json.dumps(quickstart_gateway.url)}"
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "CODEX_HOME": str(home),
        "GATEWAY_API_KEY": catalog.DEFAULT_KEY,
        "NO_COLOR": "1",
    }
    earlier = len(access_log(quickstart_gateway, "/v1/responses"))

    result = subprocess.run(  # noqa: S603 - the pinned CLI
        [str(CODEX), "exec", "--skip-git-repo-check", "-C", str(work), "-c", base_url, "Say hello"],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        check=False,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip()
    calls = access_log(quickstart_gateway, "/v1/responses")[earlier:]
    assert calls
    assert {(call["status"], call["deployment"]) for call in calls} == {(200, "mock")}
