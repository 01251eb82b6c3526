"""`gateway check-config` answers an operator's mistakes: a misspelt setting at any depth with the
setting meant, every dangling name with its YAML path, every problem of the file in one run, and
`-c FILE` on either side of the command."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway import cli
from gateway.config.loader import ConfigError, parse_config
from gateway.config.settings import GatewayConfig

ENV = {"TEAM_KEY": "team-key-0123456789", "ADMIN_KEY": "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7", "VK": "sk-vk-value"}
UPSTREAM = "http://127.0.0.1:9/v1"
# Mappings whose keys are the operator's own names, not settings.
FREE_FORM = ("policies", "metadata", "headers")


def rich_config() -> dict[str, Any]:
    """A valid file setting something at every level: each section with its defaults written out,
    and a key, a virtual key, deployments, a group and a policy with their nested blocks."""
    config: dict[str, Any] = GatewayConfig().model_dump(mode="json", exclude_none=True)
    for section in ("redis", "admin", "keys", "virtual_keys", "deployments", "policies"):
        config.pop(section)
    config["redis"] = {"url": "", "prefix": "gw:", "timeout_s": 0.5}
    config["admin"] = {"key": "${ADMIN_KEY}", "key_cache_ttl_s": 5}
    config["keys"] = [
        {
            "name": "team",
            "key": "${TEAM_KEY}",
            "deployments": ["main", "tag:fast"],
            "virtual_keys": ["openai-main"],
            "limits": {"rpm": 60, "tpm": 6000, "concurrent": 4},
            "budget": {"tokens": 1000, "cost_usd": 2.5, "period": "month", "timezone": "Europe/Paris"},
            "metadata": {"team": "alpha"},
            "cache_namespace": "shared",
        }
    ]
    config["virtual_keys"] = [{"name": "openai-main", "provider": "openai", "api_key": "${VK}"}]
    provider = {"type": "openai", "base_url": UPSTREAM, "model": "m", "virtual_key": "openai-main"}
    config["deployments"] = [
        {
            "name": "main",
            "aliases": ["instruct"],
            "tags": ["fast"],
            "provider": provider,
            "timeout_s": 30,
            "weight": 2,
            "priority": 1,
            "retries": 1,
            "fallbacks": ["spare"],
            "policies": ["default"],
            "limits": {"rpm": 100},
            "price": {"prompt_per_1m": 1.5, "completion_per_1m": 2.0},
        },
        {"name": "spare", "aliases": ["instruct"], "provider": {"type": "mock", "tokens_per_s": 10}},
    ]
    config["routing"]["groups"] = [{"alias": "instruct", "strategy": "priority", "fallbacks": ["spare"]}]
    config["policies"] = {
        "default": {
            "cache": {"ttl_s": 60},
            "input": [{"check": "pii", "action": "redact"}],
            "output": [{"check": "regex", "pattern": "secret", "action": "deny"}],
        }
    }
    return config


def problems_of(config: dict[str, Any], env: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(yaml.safe_dump(config, sort_keys=False), ENV if env is None else env, source="test.yaml")
    return caught.value.problems


def setting_paths(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The path of every setting of the document, at every depth (list positions included)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if not (path and path[-1] in FREE_FORM):
                yield (*path, key)
            yield from setting_paths(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from setting_paths(value, (*path, index))


def yaml_path(parts: tuple[Any, ...]) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def misspelt(name: str) -> str:
    middle = len(name) // 2
    return name[:middle] + name[middle] + name[middle:]  # one letter typed twice


def test_the_rich_config_is_valid() -> None:
    parse_config(yaml.safe_dump(rich_config()), ENV)


SETTINGS = sorted(setting_paths(rich_config()), key=yaml_path)


@pytest.mark.parametrize("parts", SETTINGS, ids=[yaml_path(p) for p in SETTINGS])
def test_a_misspelt_setting_at_any_depth_is_named_with_the_one_meant(parts: tuple[Any, ...]) -> None:
    config = rich_config()
    parent = config
    for part in parts[:-1]:
        parent = parent[part]
    typo = misspelt(parts[-1])
    parent[typo] = parent.pop(parts[-1])

    problems = problems_of(config)

    where = yaml_path((*parts[:-1], typo))
    # In the policies' checks pydantic names the check kind in the path (input[0].pii.actiion).
    mine = [p for p in problems if p.split(": ", 1)[0].replace(".pii.", ".").replace(".regex.", ".") == where]
    assert len(mine) == 1, problems
    assert f"unknown setting; did you mean {parts[-1]!r}?" in mine[0]


def test_a_misspelt_check_kind_is_named_with_the_kind_meant() -> None:
    config = rich_config()
    config["policies"]["default"]["input"][0]["check"] = "piii"

    [problem] = problems_of(config)

    assert problem.startswith("policies.default.input[0]: unknown check 'piii'; did you mean 'pii'?")


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (("routing", "strategy"), "round_robn", "did you mean 'round_robin'?"),
        (("limits", "on_redis_error"), "closd", "did you mean 'closed'?"),
    ],
)
def test_a_misspelt_choice_is_named_with_the_choice_meant(path: tuple[str, str], value: str, expected: str) -> None:
    config = rich_config()
    config[path[0]][path[1]] = value

    [problem] = problems_of(config)

    assert problem.startswith(f"{'.'.join(path)}: ")
    assert expected in problem


def _set(config: dict[str, Any], parts: tuple[Any, ...], value: Any) -> None:
    for part in parts[:-1]:
        config = config[part]
    config[parts[-1]] = value


# (where a name is given, the dangling name, what the problem says)
DANGLING = [
    (
        ("keys", 0, "deployments", 0),
        "mian",
        "key 'team' names 'mian', which is no deployment name; did you mean 'main'?",
    ),
    (
        ("keys", 0, "deployments", 1),
        "tag:fats",
        "key 'team' names tag 'fats', which no deployment carries; did you mean",
    ),
    (("keys", 0, "deployments", 0), "instruct", "key 'team' names 'instruct', an alias"),
    (("deployments", 0, "policies", 0), "defualt", "names policy 'defualt', which is not defined under policies; did"),
    (("deployments", 0, "fallbacks", 0), "sapre", "falls back to 'sapre', which is no deployment name or alias; did"),
    (("deployments", 0, "provider", "virtual_key"), "openai-mian", "names virtual key 'openai-mian', which is not"),
    (("routing", "groups", 0, "alias"), "instrct", "'instrct' is no deployment alias; did you mean 'instruct'?"),
    (("routing", "groups", 0, "fallbacks", 0), "spar", "falls back to 'spar', which is no deployment name or alias"),
    (("keys", 0, "virtual_keys", 0), "openai-mian", "names virtual key 'openai-mian', which is not defined under"),
]


@pytest.mark.parametrize(("parts", "name", "says"), DANGLING, ids=[yaml_path(d[0]) for d in DANGLING])
def test_a_dangling_name_is_reported_at_its_path_alongside_other_problems(
    parts: tuple[Any, ...], name: str, says: str
) -> None:
    config = rich_config()
    _set(config, parts, name)
    config["server"]["port"] = 70000  # another problem in the same file: both are reported at once
    config["deployments"][1]["timout_s"] = 3

    problems = problems_of(config)

    assert [p.split(": ", 1)[0] for p in problems if says in p] == [yaml_path(parts)], problems
    assert any(p.startswith("server.port: ") for p in problems)
    assert any(p.startswith("deployments[1].timout_s: unknown setting; did you mean 'timeout_s'?") for p in problems)
    assert len(problems) == 3, problems


def test_a_key_may_name_virtual_keys_that_redis_holds() -> None:
    config = rich_config()
    config["keys"][0]["virtual_keys"] = ["kept-in-redis"]
    config["redis"]["url"] = "redis://127.0.0.1:6379/0"

    parse_config(yaml.safe_dump(config), {**ENV, "GATEWAY_ENCRYPTION_KEY": ""})


def test_every_problem_of_a_file_is_reported_in_one_run() -> None:
    config = rich_config()
    for parts, name, _ in DANGLING[:2] + DANGLING[3:]:
        _set(config, parts, name)
    config["sever"] = {"port": 80}
    config["keys"][0]["budget"]["perod"] = "1d"

    problems = problems_of(config)

    assert len(problems) == len(DANGLING) - 1 + 2, "\n".join(problems)
    assert "sever: unknown setting; did you mean 'server'?" in "\n".join(problems)


@pytest.mark.parametrize(
    "argv",
    [["-c", "{path}", "check-config"], ["check-config", "-c", "{path}"], ["check-config", "{path}"]],
    ids=["-c before", "-c after", "positional"],
)
def test_check_config_takes_the_file_before_or_after_the_command(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = rich_config()
    broken["deployments"][0]["fallbacks"] = ["sapre"]
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(broken))
    monkeypatch.chdir(tmp_path / "..")  # no config.yaml here: the file must be the one given
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)

    status = cli.main([part.format(path=path) for part in argv])

    assert status == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{path}: invalid configuration (1 problem(s))")
    assert "deployments[0].fallbacks[0]: deployment 'main' falls back to 'sapre'" in err
    path.write_text(yaml.safe_dump(rich_config()))
    assert cli.main([part.format(path=path) for part in argv]) == 0
    assert capsys.readouterr().out.startswith(f"{path}: OK")


def test_misspelt_settings_are_suggested_inside_a_copy_too() -> None:
    """The suggestions read the models, not the document: a block copied elsewhere is held to its own."""
    config = rich_config()
    config["deployments"].append(copy.deepcopy(config["deployments"][1]) | {"name": "third", "weigth": 2})

    [problem] = problems_of(config)

    assert problem.startswith("deployments[2].weigth: unknown setting; did you mean 'weight'?")
