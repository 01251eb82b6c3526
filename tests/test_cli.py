"""The installed `gateway` command as an operator runs it: a real subprocess, a real file, an explicit env."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

GATEWAY = Path(sys.executable).parent / "gateway"  # the console script installed beside this interpreter
UPSTREAM = "http://127.0.0.1:9/v1"


def run_gateway(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    base = {"PATH": os.environ.get("PATH", ""), "GATEWAY_LOG_LEVEL": "INFO"}
    return subprocess.run(  # noqa: S603 - our own console script with fixed arguments
        [str(GATEWAY), *args],
        env={**base, **(env or {})},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,  # a gateway that starts serving instead of failing would hang here
        check=False,
    )


def write(tmp_path: Path, config: dict[str, Any] | str, name: str = "gateway.yaml") -> Path:
    path = tmp_path / name
    path.write_text(config if isinstance(config, str) else yaml.safe_dump(config, sort_keys=False))
    return path


def deployment(name: str, **provider: Any) -> dict[str, Any]:
    return {"name": name, "provider": {"type": "openai", "base_url": UPSTREAM, **provider}}


VALID = {
    "keys": [{"name": "team-a", "key": "${TEAM_A_KEY}"}],
    "virtual_keys": [{"name": "openai-main", "provider": "openai", "api_key": "${OPENAI_API_KEY}"}],
    "deployments": [
        {**deployment("instruct", virtual_key="openai-main"), "aliases": ["gpt-3.5-turbo-instruct"]},
        deployment("private", api_key="${PRIVATE_KEY}"),
        deployment("local"),
    ],
}

INVALID = """\
sever:
  port: 8080
server:
  port: 70000
deployments:
  - name: instruct
    timeout: 30
    provider:
      type: openai
      base_url: https://api.openai.com/v1
"""


def test_check_config_accepts_a_valid_file_and_lists_its_deployments(tmp_path: Path) -> None:
    path = write(tmp_path, VALID)

    result = run_gateway(
        "check-config", str(path), env={"TEAM_A_KEY": "team-a-value", "OPENAI_API_KEY": "sk-openai-value"}
    )

    assert result.returncode == 0, result.stderr
    assert f"{path}: OK" in result.stdout
    lines = result.stdout.splitlines()
    instruct = next(line for line in lines if "deployment instruct" in line)
    assert "gpt-3.5-turbo-instruct" in instruct
    assert instruct.endswith(": provider openai, ok")
    private = next(line for line in lines if "deployment private" in line)
    assert "UNAVAILABLE" in private
    assert "PRIVATE_KEY" in private
    assert any("deployment local" in line and line.endswith("ok") for line in lines)
    assert "API keys: 1 active" in result.stdout


def test_check_config_reports_every_problem_on_its_own_line(tmp_path: Path) -> None:
    path = write(tmp_path, INVALID)

    result = run_gateway("check-config", str(path))

    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert "OK" not in result.stdout
    problem_lines = [line for line in result.stderr.splitlines() if line.startswith("  - ")]
    assert len(problem_lines) == 3, result.stderr
    for yaml_path in ("sever", "server.port", "deployments[0].timeout"):
        assert sum(line.startswith(f"  - {yaml_path}: ") for line in problem_lines) == 1, (yaml_path, result.stderr)
    assert "70000" in result.stderr
    assert str(path) in result.stderr.splitlines()[0]


def test_check_config_reports_invalid_yaml_with_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, "server:\n  port: 8080\n  host: [127.0.0.1\n")

    result = run_gateway("check-config", str(path))

    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert "not valid YAML at line" in result.stderr


def test_check_config_on_a_missing_file_says_so(tmp_path: Path) -> None:
    path = tmp_path / "missing.yaml"

    result = run_gateway("check-config", str(path))

    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert str(path) in result.stderr
    assert "No such file" in result.stderr


def test_check_config_never_prints_a_secret_from_the_environment(tmp_path: Path) -> None:
    secrets = {
        "TEAM_A_KEY": "team-a-SECRET-1",
        "OPENAI_API_KEY": "sk-openai-SECRET-2",
        "PRIVATE_KEY": "sk-priv-SECRET-3",
    }
    valid = write(tmp_path, VALID, name="valid.yaml")
    broken = dict(VALID, server={"port": 70000})
    broken["deployments"] = [*VALID["deployments"], {**deployment("x", api_key="${PRIVATE_KEY}"), "colour": "red"}]
    invalid = write(tmp_path, broken, name="invalid.yaml")

    ok = run_gateway("check-config", str(valid), env=secrets)
    failed = run_gateway("check-config", str(invalid), env=secrets)

    assert ok.returncode == 0, ok.stderr
    assert failed.returncode != 0
    assert "server.port" in failed.stderr
    for result in (ok, failed):
        output = result.stdout + result.stderr
        for value in secrets.values():
            assert value not in output


def test_check_config_rejects_a_secret_written_in_the_file_without_printing_it(tmp_path: Path) -> None:
    literal = "sk-proj-WRITTEN-IN-THE-FILE-42"
    path = write(tmp_path, {"deployments": [deployment("private", api_key=literal)]})

    result = run_gateway("check-config", str(path))

    assert result.returncode != 0
    assert "deployments[0].provider.api_key" in result.stderr
    assert literal not in result.stdout + result.stderr


def test_serve_with_an_invalid_config_exits_before_listening(tmp_path: Path) -> None:
    path = write(tmp_path, INVALID)

    result = run_gateway("serve", "-c", str(path), "--port", "0")

    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert "server.port" in result.stderr
    assert "deployments[0].timeout" in result.stderr


def test_serve_reads_the_config_named_by_the_environment(tmp_path: Path) -> None:
    path = write(tmp_path, INVALID)

    result = run_gateway("serve", env={"GATEWAY_CONFIG": str(path)}, cwd=tmp_path)

    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert str(path) in result.stderr


def test_config_option_before_the_subcommand_is_honoured(tmp_path: Path) -> None:
    path = write(tmp_path, INVALID)

    result = run_gateway("-c", str(path), "serve", cwd=tmp_path)  # no config.yaml here: nothing else to load

    assert result.returncode != 0
    assert str(path) in result.stderr


def test_serve_with_an_unknown_log_level_fails_without_a_traceback(tmp_path: Path) -> None:
    path = write(tmp_path, INVALID)

    result = run_gateway("serve", "-c", str(path), "--log-level", "verbose")

    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert "verbose" in result.stderr.lower()
