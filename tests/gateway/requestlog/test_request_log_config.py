"""`request_log:` in config.yaml: `gateway check-config` accepts it and says where the log goes; a
PostgreSQL password only ever comes from the environment; a wrong setting is named by its path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway import cli
from gateway.config.loader import ConfigError, load_config, parse_config

MOCK = {"deployments": [{"name": "mock", "provider": {"type": "mock"}}]}


def write(folder: Path, request_log: dict[str, Any]) -> Path:
    path = folder / "gateway.yaml"
    path.write_text(yaml.safe_dump({**MOCK, "request_log": request_log}))
    return path


POSTGRES = {"LOG_URL": "postgresql://gw:s3cret-pw@db.internal:5433/logs"}
EVERY_SETTING = {
    "queue_size": 50,
    "batch_size": 10,
    "flush_interval_s": 0.5,
    "team_field": "squad",
    "include_bodies": True,
    "max_body_chars": 500,
}


@pytest.mark.parametrize(
    ("request_log", "env", "said"),
    [
        ({}, {}, "request log: SQLite file {folder}/requests.db, records kept 30 days"),
        ({"url": "sqlite:///logs/r.db", "retention_days": 7}, {}, "SQLite file {folder}/logs/r.db, records kept 7"),
        ({"url": "${LOG_URL}"}, POSTGRES, "request log: postgresql://db.internal:5433/logs"),
        ({"url": "${LOG_URL:-}"}, {}, "SQLite file {folder}/requests.db"),
        ({"enabled": False}, {}, "request log: off"),
        (EVERY_SETTING, {}, "requests.db"),
    ],
)
def test_check_config_accepts_the_request_log_and_says_where_it_goes(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    request_log: dict[str, Any],
    env: dict[str, str],
    said: str,
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    path = write(tmp_path, request_log)

    assert cli.main(["check-config", str(path)]) == 0
    out = capsys.readouterr().out

    assert said.format(folder=tmp_path.resolve()) in out
    assert "s3cret-pw" not in out


def test_a_postgresql_password_written_in_the_file_is_refused_without_being_echoed(tmp_path: Path) -> None:
    path = write(tmp_path, {"url": "postgresql://gw:s3cret-pw@db.internal/logs"})

    with pytest.raises(ConfigError) as refused:
        load_config(path, env={})

    [problem] = refused.value.problems
    assert problem.startswith("request_log.url: ")
    assert "environment reference" in problem
    assert "s3cret-pw" not in refused.value.report()


def test_a_postgresql_url_without_a_password_may_be_written_in_the_file() -> None:
    text = yaml.safe_dump({**MOCK, "request_log": {"url": "postgresql://gw@db.internal/logs"}})

    loaded = parse_config(text, {})

    assert loaded.config.request_log.url.get_secret_value() == "postgresql://gw@db.internal/logs"


@pytest.mark.parametrize(
    ("request_log", "path"),
    [
        ({"url": "mysql://db/logs"}, "request_log.url"),
        ({"url": "sqlite:///"}, "request_log.url"),
        ({"queue_size": 0}, "request_log.queue_size"),
        ({"batch_size": 20_000}, "request_log.batch_size"),
        ({"retention_days": 0}, "request_log.retention_days"),
        ({"flush_interval_s": 0}, "request_log.flush_interval_s"),
        ({"team_field": "no spaces"}, "request_log.team_field"),
        ({"retention_day": 3}, "request_log.retention_day"),
    ],
)
def test_a_wrong_request_log_setting_is_named_by_its_path(request_log: dict[str, Any], path: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_config(yaml.safe_dump({**MOCK, "request_log": request_log}), {})

    assert [problem.split(":")[0] for problem in refused.value.problems] == [path]
