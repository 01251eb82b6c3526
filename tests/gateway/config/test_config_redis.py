"""config.yaml's `redis:` section: the Sentinels' own credentials (mode sentinel only, from the
environment only, never printed) and `timeout_s` (the request path's bound on Redis, range-checked)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from gateway.config.loader import ConfigError, LoadedConfig, parse_config

SENTINELS: dict[str, Any] = {"mode": "sentinel", "sentinels": ["127.0.0.1:26379"], "service_name": "mymaster"}
PASSWORD = "stl-SECRET-sentinel-password-0123456789"
ENV = {"SENTINEL_PASSWORD": PASSWORD}


def load(redis: dict[str, Any], env: dict[str, str] | None = None) -> LoadedConfig:
    return parse_config(yaml.safe_dump({"redis": redis}), env or {}, source="test.yaml")


def problems_of(redis: dict[str, Any], env: dict[str, str] | None = None) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        load(redis, env)
    return caught.value


@pytest.mark.parametrize("field", ["sentinel_password", "sentinel_username"])
@pytest.mark.parametrize(
    "where",
    [{"url": "redis://127.0.0.1:6379/0"}, {"mode": "cluster", "url": "redis://127.0.0.1:7000"}],
    ids=["single", "cluster"],
)
def test_sentinel_credentials_apply_to_mode_sentinel_only(field: str, where: dict[str, str]) -> None:
    value = "${SENTINEL_PASSWORD}" if field == "sentinel_password" else "gateway"

    error = problems_of({**where, field: value}, ENV)

    [problem] = error.problems
    assert problem.startswith(f"redis: '{field}' applies to mode 'sentinel' only")
    assert PASSWORD not in error.report()


def test_a_sentinel_username_needs_a_password() -> None:
    [problem] = problems_of({**SENTINELS, "sentinel_username": "gateway"}).problems

    assert problem.startswith("redis: 'sentinel_username' needs 'sentinel_password'")


@pytest.mark.parametrize(
    "written", [PASSWORD, f"${{SENTINEL_PASSWORD:-{PASSWORD}}}"], ids=["literal", "literal-as-default"]
)
def test_a_sentinel_password_written_in_the_file_is_refused_without_echoing_it(written: str) -> None:
    error = problems_of({**SENTINELS, "sentinel_password": written}, {"SENTINEL_PASSWORD": "from-env"})

    [problem] = error.problems
    assert problem.startswith("redis.sentinel_password: a secret may only be given as an environment reference")
    assert PASSWORD not in error.report()


def test_the_sentinel_credentials_come_from_the_environment_and_are_never_printed() -> None:
    loaded = load({**SENTINELS, "sentinel_username": "gateway", "sentinel_password": "${SENTINEL_PASSWORD}"}, ENV)
    target = loaded.config.redis.target()

    assert (target.sentinel_username, target.sentinel_password) == ("gateway", PASSWORD)
    assert not [warning for warning in loaded.warnings if "sentinel" in warning]
    for shown in (repr(loaded), str(loaded.config), repr(target), str(target), target.describe()):
        assert PASSWORD not in shown


def test_an_unset_sentinel_password_warns_naming_the_variable_and_the_gateway_still_starts() -> None:
    loaded = load({**SENTINELS, "sentinel_password": "${SENTINEL_PASSWORD}"})

    [warning] = [warning for warning in loaded.warnings if warning.startswith("redis.sentinel_password")]
    assert "environment variable SENTINEL_PASSWORD is not set" in warning
    assert loaded.config.redis.target().sentinel_password == ""  # the Sentinels are asked without one


def test_timeout_s_is_a_quarter_second_unless_raised() -> None:
    assert load({"url": "redis://127.0.0.1:6379/0"}).config.redis.timeout_s == 0.25
    assert load({"url": "rediss://10.0.0.1:6380/0", "timeout_s": 2}).config.redis.timeout_s == 2


@pytest.mark.parametrize("value", [0, -1, 10.5, "soon"])
def test_a_timeout_s_out_of_range_is_named_with_its_value(value: object) -> None:
    [problem] = problems_of({"url": "redis://127.0.0.1:6379/0", "timeout_s": value}).problems

    assert problem.startswith("redis.timeout_s: ")
    assert repr(value) in problem
