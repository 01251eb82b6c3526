"""The installed `gateway` command as an operator runs it: a real subprocess, a real file, an explicit env."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
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


# --- everyday mistakes: one line naming the problem and its fix, never a traceback ---------------


def test_a_provider_type_typo_names_the_nearest_type(tmp_path: Path) -> None:
    config = {
        "virtual_keys": [{"name": "main", "provider": "opneai", "api_key": "${OPENAI_API_KEY}"}],
        "deployments": [{"name": "a", "provider": {"type": "antropic", "base_url": UPSTREAM}}],
    }
    path = write(tmp_path, config)

    result = run_gateway("check-config", str(path))

    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    [deployment_line] = [line for line in lines if "deployments[0].provider.type" in line]
    assert "unknown provider type 'antropic'; did you mean 'anthropic'?" in deployment_line
    [virtual_line] = [line for line in lines if "virtual_keys[0].provider" in line]
    assert "unknown provider type 'opneai'; did you mean 'openai'?" in virtual_line


def test_a_redis_url_without_a_scheme_is_a_config_problem(tmp_path: Path) -> None:
    path = write(tmp_path, {"redis": {"url": "localhost:6379"}})

    result = run_gateway("check-config", str(path))

    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "redis.url: must start with redis://" in result.stderr


def test_unset_admin_and_metrics_keys_are_warnings_naming_their_variables(tmp_path: Path) -> None:
    config = {
        "admin": {"key": "${ADMIN_KEY}"},
        "observability": {"metrics": {"key": "${METRICS_KEY}"}},
        "deployments": [deployment("local")],
    }
    path = write(tmp_path, config)

    result = run_gateway("check-config", str(path))  # neither variable is in its environment

    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stdout.splitlines() if line.startswith("  warning: ")]
    [admin] = [line for line in warnings if "ADMIN_KEY" in line]
    assert "admin API is off" in admin
    [metrics] = [line for line in warnings if "METRICS_KEY" in line]
    assert "/metrics" in metrics
    assert "closed" in metrics
    assert not any("every caller is accepted" in line for line in warnings)  # an unset admin key opens nothing


@pytest.mark.parametrize(
    ("option", "value", "named"),
    [("--port", "70000", "--port: must be <= 65535"), ("--workers", "0", "--workers: must be >= 1")],
)
def test_serve_refuses_an_out_of_range_option_as_a_usage_error(
    tmp_path: Path, option: str, value: str, named: str
) -> None:
    path = write(tmp_path, {"deployments": [deployment("local")]})

    result = run_gateway("serve", "-c", str(path), option, value)

    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    [line] = result.stderr.splitlines()
    assert named in line


def test_serve_with_a_malformed_encryption_key_says_so_in_one_line(tmp_path: Path) -> None:
    path = write(tmp_path, {"redis": {"url": "redis://127.0.0.1:1/0"}, "deployments": [deployment("local")]})

    result = run_gateway("serve", "-c", str(path), "--port", "0", env={"GATEWAY_ENCRYPTION_KEY": "not-a-fernet-key"})

    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    [line] = result.stderr.splitlines()
    assert "GATEWAY_ENCRYPTION_KEY must hold Fernet keys" in line
    assert "gateway keys encryption-key" in line  # the fix
    assert "not-a-fernet-key" not in line


def test_an_unknown_command_is_a_one_line_usage_error() -> None:
    result = run_gateway("sevre")

    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    [line] = result.stderr.splitlines()
    assert "invalid choice: 'sevre'" in line
    assert "gateway --help" in line
