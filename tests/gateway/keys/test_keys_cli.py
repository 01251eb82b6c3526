"""`gateway keys …` against a real Redis: values printed once, nothing secret anywhere else."""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import subprocess
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis
import yaml

from gateway import cli
from gateway.api.errors import AuthenticationFailed, InvalidRequest
from gateway.cli import build_parser
from gateway.keys.directory import KeyDirectory
from gateway.keys.store import RedisKeyStore
from gateway.keys.vault import Vault, generate_encryption_key
from gateway.keys.virtual_store import RedisVirtualKeyStore
from tests.gateway.config.test_cli import GATEWAY, run_gateway
from tests.support.redis_helpers import closed_port_url, redis_client


@pytest.fixture
async def client(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    async with redis_client(redis_url) as redis:
        yield redis


def gateway_keys(redis_url: str, prefix: str, *argv: str) -> int:
    return cli.main(["-c", "/nonexistent/config.yaml", "keys", "--redis-url", redis_url, "--prefix", prefix, *argv])


async def test_create_prints_the_value_once_and_it_authenticates(
    redis_url: str, redis_prefix: str, client: aioredis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["create", "team-b", "--deployments", "instruct,tag:fast", "--rpm", "60", "--budget-tokens", "1000"]
    assert await _in_thread(redis_url, redis_prefix, *argv) == 0
    out, err = capsys.readouterr()
    value = out.strip()
    assert value.startswith("gw-")
    assert value not in err
    record = await KeyDirectory([], RedisKeyStore(client, redis_prefix)).authenticate({"apikey": value})
    assert (record.limits.rpm, record.budget.tokens if record.budget else None) == (60, 1000)
    assert await _in_thread(redis_url, redis_prefix, "list") == 0
    listed, _ = capsys.readouterr()
    assert "team-b" in listed
    assert value not in listed
    assert record.sha256 not in listed


async def test_rotate_and_revoke(
    redis_url: str, redis_prefix: str, client: aioredis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    await _in_thread(redis_url, redis_prefix, "create", "team-b")
    old = capsys.readouterr().out.strip()
    assert await _in_thread(redis_url, redis_prefix, "rotate", "team-b") == 0
    new = capsys.readouterr().out.strip()
    directory = KeyDirectory([], RedisKeyStore(client, redis_prefix, cache_ttl_s=0))
    assert (await directory.authenticate({"apikey": new})).name == "team-b"
    assert await _in_thread(redis_url, redis_prefix, "revoke", "team-b") == 0
    for value in (old, new):
        with pytest.raises(AuthenticationFailed):
            await directory.authenticate({"apikey": value})
    assert await _in_thread(redis_url, redis_prefix, "revoke", "nobody") == 1


async def test_a_virtual_key_is_read_from_stdin_and_stored_encrypted(
    redis_url: str,
    redis_prefix: str,
    client: aioredis.Redis,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GATEWAY_ENCRYPTION_KEY", generate_encryption_key())
    monkeypatch.setattr("sys.stdin", io.StringIO("sk-from-stdin-secret\n"))
    assert await _in_thread(redis_url, redis_prefix, "add-virtual", "openai-b", "--provider", "openai") == 0
    out, err = capsys.readouterr()
    assert "sk-from-stdin-secret" not in out + err
    raw = await client.hget(f"{redis_prefix}vkeys", "openai-b")
    assert raw is not None
    assert b"sk-from-stdin-secret" not in raw


def test_no_redis_is_an_error_not_a_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["-c", "/nonexistent/config.yaml", "keys", "list"]) == 1
    [line] = capsys.readouterr().err.splitlines()
    assert "no Redis" in line
    assert "/nonexistent/config.yaml does not exist" in line
    assert "--redis-url" in line  # the fix


def test_an_encryption_key_can_be_generated(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["keys", "encryption-key"]) == 0
    assert len(capsys.readouterr().out.strip()) == 44


async def _in_thread(redis_url: str, prefix: str, *argv: str) -> int:
    """The command runs its own event loop, as it does from a shell."""
    return await asyncio.to_thread(gateway_keys, redis_url, prefix, *argv)


# --- everyday mistakes, as a user meets them: the real command, one line, no traceback ------------


def keys_command(*argv: str, stdin: str = "", env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`gateway keys …` in its own process, from a folder with no config.yaml."""
    return subprocess.run(  # noqa: S603 - our own console script with fixed arguments
        [str(GATEWAY), "keys", *argv],
        input=stdin,
        env={"PATH": os.environ.get("PATH", ""), **(env or {})},
        cwd=tempfile.gettempdir(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def problem_lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines, "a failing command says why"
    return lines


def test_an_unreachable_redis_is_one_line_naming_it_and_the_fix() -> None:
    url = closed_port_url()

    result = keys_command("--redis-url", url, "list")

    assert result.returncode == 1
    [line] = problem_lines(result)
    assert f"cannot reach Redis at {url}: connection refused" in line
    assert "--redis-url" in line


def test_the_password_of_an_unreachable_redis_is_not_shown() -> None:
    url = closed_port_url().replace("redis://", "redis://:hunter2-SECRET@")

    result = keys_command("list", "--redis-url", url)

    assert result.returncode == 1
    [line] = problem_lines(result)
    assert "cannot reach Redis" in line
    assert "hunter2-SECRET" not in result.stdout + result.stderr


def test_a_redis_url_without_a_scheme_is_a_usage_error() -> None:
    result = keys_command("--redis-url", "localhost:6379", "list")

    assert result.returncode == 2
    [line] = problem_lines(result)
    assert line.startswith("gateway: --redis-url: must start with redis://")


async def test_invalid_values_are_named_by_their_option_and_nothing_is_stored(
    redis_url: str, redis_prefix: str, client: aioredis.Redis
) -> None:
    result = await asyncio.to_thread(
        keys_command, "--redis-url", redis_url, "--prefix", redis_prefix, "create", "bad name!", "--rpm", "-3"
    )

    assert result.returncode == 2
    lines = problem_lines(result)
    assert "gateway: --rpm: must be >= 1 (got -3)" in lines
    assert any(line.startswith("gateway: NAME: must start with a letter or digit") for line in lines), lines
    assert len(lines) == 2
    assert result.stdout == ""  # no key value
    assert [key async for key in client.scan_iter(match=redis_prefix + "*")] == []


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--budget-usd", "-1"], "--budget-usd: must be > 0"),
        (["--budget-tokens", "0"], "--budget-tokens: must be >= 1"),
        (["--budget-tokens", "10", "--period", "1x"], "--period: a period is a number and a unit"),
        (["--period", "1h"], "--period: give it with --budget-tokens or --budget-usd"),
        (["--expires", "next tuesday"], "argument --expires: not an ISO 8601 date"),
        (["--expires", "2001-01-01"], "--expires: must be in the future"),
        (["--concurrent", "many"], "argument --concurrent: invalid int value"),
        (["--metadata", "team"], "argument --metadata: expected KEY=VALUE"),
    ],
    ids=[
        "negative-usd",
        "zero-tokens",
        "bad-period",
        "period-without-budget",
        "bad-date",
        "past-date",
        "not-a-number",
        "metadata",
    ],
)
def test_each_invalid_create_option_is_a_usage_error_checked_before_redis(argv: list[str], named: str) -> None:
    # Redis is unreachable here: the arguments are checked first, so the mistake is what is reported.
    result = keys_command("--redis-url", closed_port_url(), "create", "team-c", *argv)

    assert result.returncode == 2
    [line] = problem_lines(result)
    assert named in line
    assert "Redis" not in line


@pytest.mark.parametrize(
    ("metadata", "problem"),
    [
        ("team=a\x1b[2Jb", "the value of 'team' holds control characters"),
        ("team=" + "x" * 257, "the value of 'team' is longer than 256 characters"),
    ],
)
def test_metadata_for_a_new_key_is_bounded_and_refuses_control_characters(
    metadata: str, problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Redis is unreachable: the metadata is checked first, so it is what is reported.
    assert gateway_keys(closed_port_url(), "p:", "create", "team-c", "--metadata", metadata) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("gateway: --metadata:")
    assert problem in line


async def test_a_provider_typo_is_refused_with_the_nearest_type_and_nothing_is_stored(
    redis_url: str, redis_prefix: str, client: aioredis.Redis
) -> None:
    env = {"GATEWAY_ENCRYPTION_KEY": generate_encryption_key()}
    argv = ("--redis-url", redis_url, "--prefix", redis_prefix, "add-virtual", "openai-c", "--provider", "opneai")

    result = await asyncio.to_thread(keys_command, *argv, stdin="sk-typo-secret\n", env=env)

    assert result.returncode == 2
    [line] = problem_lines(result)
    assert "--provider: unknown provider type 'opneai'; did you mean 'openai'?" in line
    assert "sk-typo-secret" not in result.stdout + result.stderr
    assert await client.hget(f"{redis_prefix}vkeys", "openai-c") is None


async def test_the_virtual_key_store_refuses_an_unknown_provider_type(
    redis_url: str, redis_prefix: str, client: aioredis.Redis
) -> None:
    store = RedisVirtualKeyStore(client, redis_prefix, Vault([generate_encryption_key()]))

    with pytest.raises(InvalidRequest) as refused:
        await store.create("anthropic-c", "antropic", "sk-secret")

    assert refused.value.param == "provider"
    assert "did you mean 'anthropic'?" in refused.value.message
    assert await client.hget(f"{redis_prefix}vkeys", "anthropic-c") is None


async def test_the_config_option_may_come_after_keys_or_after_the_action(
    redis_url: str, redis_prefix: str, tmp_path: Path
) -> None:
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump({"redis": {"url": redis_url, "prefix": redis_prefix}}))

    created = await asyncio.to_thread(keys_command, "-c", str(config), "create", "team-d")  # as docs/keys.md writes it
    after_action = await asyncio.to_thread(keys_command, "list", "--config", str(config))
    before_keys = await asyncio.to_thread(
        run_gateway, "-c", str(config), "keys", "show", "team-d", cwd=Path(tempfile.gettempdir())
    )

    assert created.returncode == 0, created.stderr
    assert created.stdout.strip().startswith("gw-")
    assert after_action.returncode == 0, after_action.stderr
    assert "team-d" in after_action.stdout
    assert before_keys.returncode == 0, before_keys.stderr
    assert json.loads(before_keys.stdout)["name"] == "team-d"


async def test_show_prints_what_the_admin_api_shows(
    redis_url: str, redis_prefix: str, client: aioredis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["create", "team-e", "--rpm", "60", "--budget-usd", "5", "--period", "day", "--metadata", "team=search"]
    argv += ["--expires", "2031-01-02"]
    await _in_thread(redis_url, redis_prefix, *argv)
    value = capsys.readouterr().out.strip()

    assert await _in_thread(redis_url, redis_prefix, "show", "team-e") == 0
    shown = json.loads(capsys.readouterr().out)

    record = await KeyDirectory([], RedisKeyStore(client, redis_prefix)).get("team-e")
    assert record is not None
    assert shown == json.loads(json.dumps(record.public()))  # the admin API's GET /admin/keys/team-e
    assert (shown["limits"]["rpm"], shown["budget"]["cost_usd"], shown["metadata"], shown["status"]) == (
        60,
        5.0,
        {"team": "search"},
        "active",
    )
    assert shown["expires_at"].startswith("2031-01-02")
    assert value not in json.dumps(shown)
    assert "sha256" not in shown


def test_a_config_key_whose_variable_is_unset_is_listed_and_shown_as_disabled(
    redis_url: str, redis_prefix: str, tmp_path: Path
) -> None:
    config = tmp_path / "gateway.yaml"
    keys = [{"name": "ops", "key": "${GATEWAY_TEST_UNSET_KEY_VARIABLE}"}]
    config.write_text(yaml.safe_dump({"redis": {"url": redis_url, "prefix": redis_prefix}, "keys": keys}))

    listed = keys_command("-c", str(config), "list")
    shown = keys_command("-c", str(config), "show", "ops")

    assert listed.returncode == 0, listed.stderr
    assert "ops\tconfig\t-\tdisabled (GATEWAY_TEST_UNSET_KEY_VARIABLE is not set)" in listed.stdout.splitlines()
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["status"] == "disabled"


def test_keys_without_an_action_is_a_one_line_usage_error() -> None:
    result = keys_command()

    assert result.returncode == 2
    [line] = problem_lines(result)
    assert "ACTION" in line
    assert "gateway keys --help" in line


def test_keys_help_describes_every_action() -> None:
    result = keys_command("--help")

    assert result.returncode == 0
    actions = _subcommands(_subparser(build_parser(), "keys"))
    assert len(actions) >= 10
    for name in actions:
        [line] = [line for line in result.stdout.splitlines() if line.strip().split(" ", 1)[0] == name]
        assert len(line.split()) > 1, f"`gateway keys --help` gives no text for {name!r}"


def test_every_command_and_every_argument_has_help_text() -> None:
    missing: list[str] = []

    def check(parser: argparse.ArgumentParser) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for choice in action._choices_actions:
                    if not choice.help:
                        missing.append(f"{parser.prog} {choice.dest}")
                for sub in action.choices.values():
                    check(sub)
            elif not action.help or action.help == argparse.SUPPRESS:
                missing.append(f"{parser.prog} {'/'.join(action.option_strings) or action.dest}")

    check(build_parser())

    assert missing == []


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    [subparsers] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    found: argparse.ArgumentParser = subparsers.choices[name]
    return found


def _subcommands(parser: argparse.ArgumentParser) -> list[str]:
    [subparsers] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return list(subparsers.choices)
