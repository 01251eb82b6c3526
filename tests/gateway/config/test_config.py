"""config.yaml as an operator writes it: interpolation, typos named by YAML path, secrets kept out of the file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import ClientSession
from pydantic import SecretStr

from gateway.config.loader import ConfigError, LoadedConfig, load_config, parse_config
from tests.conftest import GatewayFactory, deployment
from tests.support.fake_upstream import FakeUpstream

REPO_CONFIG = Path(__file__).resolve().parents[3] / "config.yaml"
UPSTREAM = "http://127.0.0.1:9/v1"  # never contacted: these tests only load the file
LITERAL_SECRET = "sk-live-LITERAL-0123456789abcdef"


def dump(config: dict[str, Any]) -> str:
    return yaml.safe_dump(config, sort_keys=False)


def problems_of(text: str, env: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(text, env or {}, source="test.yaml")
    return caught.value.problems


def problems_at(problems: list[str], path: str) -> list[str]:
    return [problem for problem in problems if problem.startswith(f"{path}: ")]


def valid_config() -> dict[str, Any]:
    return {
        "server": {"host": "127.0.0.1", "port": 8080},
        "keys": [{"name": "team-a", "key": "${TEAM_A_KEY}"}],
        "virtual_keys": [{"name": "openai-main", "provider": "openai", "api_key": "${OPENAI_API_KEY}"}],
        "deployments": [
            deployment("main", UPSTREAM, aliases=["main-alias"], timeout_s=30),
            deployment("shared", UPSTREAM, provider={"virtual_key": "openai-main"}),
        ],
    }


# --- ${VAR} and ${VAR:-default} ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        pytest.param({"REDIS_HOST": "redis.internal"}, "redis://redis.internal:6379/0", id="set"),
        pytest.param({}, "redis://fallback:6379/0", id="unset-uses-default"),
        pytest.param({"REDIS_HOST": ""}, "redis://fallback:6379/0", id="empty-uses-default"),
    ],
)
def test_variable_with_default_inside_a_longer_value(env: dict[str, str], expected: str) -> None:
    loaded = parse_config('redis: {url: "redis://${REDIS_HOST:-fallback}:6379/0"}', env)

    assert loaded.config.redis.url == expected


def test_required_variable_is_substituted_and_numbers_are_converted() -> None:
    text = 'server: {host: "${HOST}", port: "${PORT:-9000}", workers: "${WORKERS}"}'

    server = parse_config(text, {"HOST": "10.0.0.5", "WORKERS": "4"}).config.server

    assert (server.host, server.port, server.workers) == ("10.0.0.5", 9000, 4)


def test_empty_default_makes_a_variable_optional() -> None:
    loaded = parse_config('redis: {url: "${REDIS_URL:-}"}', {})

    assert loaded.config.redis.url == ""


# --- unknown keys, types and ranges, named by YAML path --------------------------------------


def _typo_top_level(config: dict[str, Any]) -> None:
    config["deployment"] = config.pop("deployments")


def _typo_server(config: dict[str, Any]) -> None:
    config["server"]["prot"] = config["server"].pop("port")


def _typo_deployment(config: dict[str, Any]) -> None:
    config["deployments"][1]["timeout"] = 10


def _typo_provider(config: dict[str, Any]) -> None:
    provider = config["deployments"][0]["provider"]
    provider["base_ur"] = provider.pop("base_url")


def _typo_virtual_key(config: dict[str, Any]) -> None:
    config["virtual_keys"][0]["providr"] = config["virtual_keys"][0].pop("provider")


@pytest.mark.parametrize(
    ("typo", "path"),
    [
        (_typo_top_level, "deployment"),
        (_typo_server, "server.prot"),
        (_typo_deployment, "deployments[1].timeout"),
        (_typo_provider, "deployments[0].provider.base_ur"),
        (_typo_virtual_key, "virtual_keys[0].providr"),
    ],
)
def test_unknown_key_is_named_by_its_yaml_path(typo: Any, path: str) -> None:
    config = valid_config()
    typo(config)

    problems = problems_of(dump(config))

    [problem] = problems_at(problems, path)
    assert "unknown setting" in problem


def test_every_problem_is_reported_one_line_each() -> None:
    config = valid_config()
    config["colour"] = "blue"
    config["server"]["port"] = 70000
    config["deployments"][0]["timeout_s"] = -1
    config["keys"][0]["deployment"] = ["main"]

    with pytest.raises(ConfigError) as caught:
        parse_config(dump(config), {}, source="ops/gateway.yaml")

    problems = caught.value.problems
    for path in ("colour", "server.port", "deployments[0].timeout_s", "keys[0].deployment"):
        assert len(problems_at(problems, path)) == 1, (path, problems)
    assert len(problems) == 4
    report = caught.value.report().splitlines()
    assert report[0].startswith("ops/gateway.yaml: ")
    assert report[1:] == [f"  - {problem}" for problem in problems]


def _bad_provider_block_and_bad_server(config: dict[str, Any]) -> list[str]:
    _typo_provider(config)
    config["server"]["port"] = 70000
    return ["deployments[0].provider.base_ur", "server.port"]


def _unset_variable_and_bad_server(config: dict[str, Any]) -> list[str]:
    config["deployments"][0]["provider"]["base_url"] = "${UPSTREAM_URL}"
    config["server"]["port"] = 70000
    return ["deployments[0].provider.base_url", "server.port"]


@pytest.mark.parametrize("break_it", [_bad_provider_block_and_bad_server, _unset_variable_and_bad_server])
def test_provider_and_variable_problems_are_reported_alongside_others(break_it: Any) -> None:
    config = valid_config()
    paths = break_it(config)

    problems = problems_of(dump(config))

    for path in paths:
        assert problems_at(problems, path), (path, problems)


@pytest.mark.parametrize(
    ("path", "fragment", "shown"),
    [
        ("server.port", {"server": {"port": 70000}}, "70000"),
        ("server.workers", {"server": {"workers": "many"}}, "many"),
        ("deployments[0].timeout_s", {"timeout_s": -1}, "-1"),
        ("deployments[0].provider.max_connections", {"provider": {"max_connections": -5}}, "-5"),
        ("deployments[0].provider.base_url", {"provider": {"base_url": "api.openai.com/v1"}}, "api.openai.com"),
    ],
)
def test_wrong_type_or_range_names_the_path_and_the_value(path: str, fragment: dict[str, Any], shown: str) -> None:
    config = valid_config()
    if "server" in fragment:
        config["server"].update(fragment["server"])
    elif "provider" in fragment:
        config["deployments"][0]["provider"].update(fragment["provider"])
    else:
        config["deployments"][0].update(fragment)

    problems = problems_of(dump(config))

    [problem] = problems_at(problems, path)
    assert shown in problem


def test_invalid_yaml_reports_the_line() -> None:
    text = "server:\n  port: 8080\n  host: [127.0.0.1\ndeployments: []\n"

    [problem] = problems_of(text)

    assert "YAML" in problem
    assert "line 4" in problem


@pytest.mark.parametrize("text", ["- server\n- deployments\n", "just a string\n"])
def test_top_level_must_be_a_mapping(text: str) -> None:
    [problem] = problems_of(text)

    assert "top level must be a mapping" in problem


# --- secrets ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "place"),
    [
        ("deployments[0].provider.api_key", lambda c, v: c["deployments"][0]["provider"].update(api_key=v)),
        ("virtual_keys[0].api_key", lambda c, v: c["virtual_keys"][0].update(api_key=v)),
        ("keys[0].key", lambda c, v: c["keys"][0].update(key=v)),
    ],
)
@pytest.mark.parametrize(
    "written",
    [
        pytest.param(LITERAL_SECRET, id="literal"),
        pytest.param(f"${{OPENAI_API_KEY:-{LITERAL_SECRET}}}", id="literal-as-default"),
        pytest.param(f"Bearer {LITERAL_SECRET}", id="literal-beside-text"),
    ],
)
def test_secret_written_in_the_file_is_rejected_without_echoing_it(path: str, place: Any, written: str) -> None:
    config = valid_config()
    place(config, written)

    with pytest.raises(ConfigError) as caught:
        parse_config(dump(config), {"OPENAI_API_KEY": "sk-env", "TEAM_A_KEY": "team-env"})

    [problem] = problems_at(caught.value.problems, path)
    assert "environment reference" in problem
    assert LITERAL_SECRET not in caught.value.report()
    assert LITERAL_SECRET not in str(caught.value)


def test_secret_written_as_a_number_is_rejected_without_echoing_it() -> None:
    config = valid_config()
    config["deployments"][0]["provider"]["api_key"] = 31415926535897

    with pytest.raises(ConfigError) as caught:
        parse_config(dump(config), {"OPENAI_API_KEY": "sk-env", "TEAM_A_KEY": "team-env"})

    assert problems_at(caught.value.problems, "deployments[0].provider.api_key")
    assert "31415926535897" not in caught.value.report()


def test_secret_from_the_environment_is_not_echoed_when_misplaced() -> None:
    text = 'keys: ["${TEAM_A_KEY}"]\n'

    with pytest.raises(ConfigError) as caught:
        parse_config(text, {"TEAM_A_KEY": "team-a-SECRET-value"})

    assert problems_at(caught.value.problems, "keys[0]")
    assert "team-a-SECRET-value" not in caught.value.report()


@pytest.mark.parametrize(
    ("path", "setting"),
    [
        ("deployments[0].provider.base_url", {"base_url": "${UPSTREAM_URL}"}),
        ("deployments[0].provider.model", {"model": "${UPSTREAM_MODEL}"}),
    ],
)
def test_unset_required_variable_names_the_path_and_the_variable(path: str, setting: dict[str, str]) -> None:
    config = valid_config()
    config["deployments"][0]["provider"].update(setting)
    variable = next(iter(setting.values()))[2:-1]

    problems = problems_of(dump(config), {"OPENAI_API_KEY": "sk-env", "TEAM_A_KEY": "team-env"})

    assert any(variable in problem for problem in problems_at(problems, path)), problems


def test_unset_variable_in_a_number_field_names_the_variable() -> None:
    problems = problems_of('server: {port: "${PORT}"}\n')

    assert any("PORT" in problem.removeprefix("server.port:") for problem in problems_at(problems, "server.port"))


def test_unset_provider_key_marks_only_that_deployment_unavailable() -> None:
    config = {
        "deployments": [
            deployment("keyless", UPSTREAM, provider={"api_key": "${MISSING_PROVIDER_KEY}"}),
            deployment("keyed", UPSTREAM, provider={"api_key": "${PRESENT_PROVIDER_KEY}"}),
        ]
    }

    loaded = parse_config(dump(config), {"PRESENT_PROVIDER_KEY": "sk-present"})

    keyless, keyed = loaded.deployments["keyless"], loaded.deployments["keyed"]
    assert keyless.unavailable is not None
    assert "MISSING_PROVIDER_KEY" in keyless.unavailable
    assert keyed.unavailable is None
    assert keyed.credential == "sk-present"
    assert any("keyless" in warning and "MISSING_PROVIDER_KEY" in warning for warning in loaded.warnings)
    assert not any("'keyed'" in warning for warning in loaded.warnings)


def test_unset_virtual_key_marks_the_deployments_using_it_unavailable() -> None:
    loaded = parse_config(dump(valid_config()), {"TEAM_A_KEY": "team-env"})

    shared = loaded.deployments["shared"]
    assert shared.unavailable is not None
    assert "OPENAI_API_KEY" in shared.unavailable
    assert loaded.deployments["main"].unavailable is None
    assert any("shared" in warning and "OPENAI_API_KEY" in warning for warning in loaded.warnings)


def test_unset_client_key_disables_only_that_key() -> None:
    config = valid_config()
    config["keys"].append({"name": "ci", "key": "${CI_KEY}"})

    loaded = parse_config(dump(config), {"OPENAI_API_KEY": "sk-env", "CI_KEY": "ci-env"})

    assert [key.name for key in loaded.client_keys] == ["ci"]
    assert any("team-a" in warning and "TEAM_A_KEY" in warning for warning in loaded.warnings)


# --- names and references --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("deployments", "name"),
    [
        pytest.param([("a", []), ("a", [])], "a", id="same-name"),
        pytest.param([("a", ["b"]), ("b", [])], "b", id="alias-is-another-name"),
        pytest.param([("a", ["a"])], "a", id="alias-is-own-name"),
    ],
)
def test_ambiguous_model_names_are_rejected(deployments: list[tuple[str, list[str]]], name: str) -> None:
    config = {"deployments": [deployment(dep, UPSTREAM, aliases=aliases) for dep, aliases in deployments]}

    problems = problems_at(problems_of(dump(config)), "deployments")

    assert any(f"'{name}'" in problem for problem in problems), problems


def test_a_shared_alias_makes_a_group() -> None:
    config = {"deployments": [deployment(name, UPSTREAM, aliases=["shared"]) for name in ("a", "b")]}

    loaded = parse_config(dump(config), {})

    assert [d.config.aliases for d in loaded.deployments.values()] == [["shared"], ["shared"]]


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        pytest.param({"fallbacks": ["nowhere"]}, "'nowhere'", id="unknown-fallback"),
        pytest.param({"routing": {"groups": [{"alias": "no-such-alias"}]}}, "'no-such-alias'", id="unknown-group"),
        pytest.param(
            {"routing": {"groups": [{"alias": "shared", "fallbacks": ["ghost"]}]}}, "'ghost'", id="group-fallback"
        ),
        pytest.param({"routing": {"strategy": "fastest"}}, "routing.strategy", id="unknown-strategy"),
        pytest.param({"routing": {"max_attempts": 0}}, "routing.max_attempts", id="no-attempts"),
    ],
)
def test_routing_references_are_checked(extra: dict[str, Any], expected: str) -> None:
    first = deployment("a", UPSTREAM, aliases=["shared"], fallbacks=extra.pop("fallbacks", []))
    config = {"deployments": [first], **extra}

    problems = problems_of(dump(config))

    assert any(expected in problem for problem in problems), problems


@pytest.mark.parametrize("section", ["keys", "virtual_keys"])
def test_duplicate_key_names_are_rejected(section: str) -> None:
    config = valid_config()
    config[section].append(dict(config[section][0]))

    problems = problems_of(dump(config), {"OPENAI_API_KEY": "sk-env", "TEAM_A_KEY": "team-env"})

    [problem] = problems_at(problems, section)
    assert config[section][0]["name"] in problem


def test_reference_to_an_undefined_virtual_key_is_rejected() -> None:
    config = valid_config()
    config["deployments"][1]["provider"]["virtual_key"] = "openai-mian"

    problems = problems_of(dump(config), {"OPENAI_API_KEY": "sk-env", "TEAM_A_KEY": "team-env"})

    assert any("'shared'" in problem and "'openai-mian'" in problem for problem in problems), problems


def test_undefined_virtual_key_is_named_by_its_yaml_path() -> None:
    config = valid_config()
    config["deployments"][1]["provider"]["virtual_key"] = "openai-mian"

    problems = problems_of(dump(config), {"OPENAI_API_KEY": "sk-env", "TEAM_A_KEY": "team-env"})

    assert problems_at(problems, "deployments[1].provider.virtual_key"), problems


def test_virtual_key_of_the_wrong_type_is_a_config_error() -> None:
    config = valid_config()
    config["deployments"][1]["provider"]["virtual_key"] = ["openai-main"]

    problems = problems_of(dump(config), {"OPENAI_API_KEY": "sk-env", "TEAM_A_KEY": "team-env"})

    assert problems_at(problems, "deployments[1].provider.virtual_key"), problems


def test_unknown_provider_type_is_rejected_listing_the_known_ones() -> None:
    config = valid_config()
    config["deployments"][0]["provider"]["type"] = "anthropc"

    problems = problems_of(dump(config), {"OPENAI_API_KEY": "sk-env", "TEAM_A_KEY": "team-env"})

    [problem] = problems_at(problems, "deployments[0].provider.type")
    assert "'anthropc'" in problem
    assert "known:" in problem
    assert "openai" in problem.partition("known:")[2]


# --- the documented example ------------------------------------------------------------------


def test_repository_config_loads_with_an_empty_environment() -> None:
    loaded = load_config(REPO_CONFIG, {})

    assert set(loaded.deployments) == {"mock", "instruct", "local-vllm"}
    assert loaded.config.deployments[0].provider.type == "mock"  # the quick start's, first
    assert loaded.deployments["mock"].unavailable is None
    instruct = loaded.deployments["instruct"]
    assert instruct.unavailable is not None
    assert "OPENAI_API_KEY" in instruct.unavailable
    assert loaded.deployments["local-vllm"].unavailable is None
    assert instruct.config.aliases == ["gpt-3.5-turbo-instruct"]


def test_repository_config_serves_everything_once_its_key_is_set() -> None:
    loaded = load_config(REPO_CONFIG, {"OPENAI_API_KEY": "sk-from-env"})

    assert all(resolved.unavailable is None for resolved in loaded.deployments.values())
    assert loaded.deployments["instruct"].credential == "sk-from-env"


def test_missing_file_is_a_config_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"

    with pytest.raises(ConfigError) as caught:
        load_config(path, {})

    assert str(path) in caught.value.report()
    assert "cannot read" in caught.value.report()


# --- secrets stay out of repr() --------------------------------------------------------------

SECRETS = {"OPENAI_API_KEY": "vk-SECRET-openai", "TEAM_A_KEY": "ck-SECRET-team", "MAIN_KEY": "dk-SECRET-main"}


@pytest.fixture
def loaded_with_secrets() -> LoadedConfig:
    config = valid_config()
    config["deployments"][0]["provider"]["api_key"] = "${MAIN_KEY}"
    return parse_config(dump(config), SECRETS)


def test_client_and_virtual_keys_are_secret_strings(loaded_with_secrets: LoadedConfig) -> None:
    config = loaded_with_secrets.config

    assert isinstance(config.keys[0].key, SecretStr)
    assert isinstance(config.virtual_keys[0].api_key, SecretStr)
    for shown in (repr(config.keys), str(config.keys), repr(config.virtual_keys), str(config.virtual_keys)):
        assert "SECRET" not in shown


@pytest.mark.parametrize(
    "render",
    [
        pytest.param(lambda loaded: repr(loaded.config), id="repr-config"),
        pytest.param(lambda loaded: str(loaded.config), id="str-config"),
        pytest.param(lambda loaded: repr(loaded.deployments["main"]), id="repr-deployment"),
        pytest.param(repr, id="repr-loaded"),
        pytest.param(str, id="str-loaded"),
    ],
)
def test_no_secret_value_in_the_printed_config(loaded_with_secrets: LoadedConfig, render: Any) -> None:
    shown = render(loaded_with_secrets)

    assert "main" in shown
    for value in SECRETS.values():
        assert value not in shown


# --- end to end: a missing credential costs one deployment, not the gateway ------------------


async def test_deployment_without_its_key_answers_503_and_the_other_serves(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession
) -> None:
    config = {
        "deployments": [
            deployment("good", upstream.base_url, provider={"api_key": "${GOOD_KEY}"}, timeout_s=5),
            deployment("broken", upstream.base_url, provider={"api_key": "${BROKEN_KEY}"}, timeout_s=5),
        ]
    }
    server = await make_gateway(config, {"GOOD_KEY": "sk-good-SECRET"})
    url = server.make_url("/v1/completions")

    async with http.post(url, json={"model": "broken", "prompt": "hi"}) as response:
        status, body = response.status, await response.json()
    async with http.post(url, json={"model": "good", "prompt": "hi"}) as response:
        good_status, good_body = response.status, await response.json()

    assert status == 503
    assert set(body["error"]) == {"message", "type", "param", "code"}
    message = body["error"]["message"]
    assert "Deployment 'broken' cannot serve" in message
    assert "sk-good-SECRET" not in str(body)
    assert good_status == 200
    assert good_body["choices"][0]["text"] == "echo: hi"
    assert len(upstream.received) == 1
    assert upstream.received[0].headers["Authorization"] == "Bearer sk-good-SECRET"


async def test_ready_lists_the_unavailable_deployment(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession
) -> None:
    config = {
        "deployments": [
            deployment("good", upstream.base_url, provider={"api_key": "${GOOD_KEY}"}),
            deployment("broken", upstream.base_url, provider={"api_key": "${BROKEN_KEY}"}),
        ]
    }
    server = await make_gateway(config, {"GOOD_KEY": "sk-good-SECRET"})

    async with http.get(server.make_url("/ready")) as response:
        status, body = response.status, await response.json()

    assert status == 200
    assert body["deployments"]["good"]["state"] == "ready"
    assert body["deployments"]["broken"]["state"] == "unavailable"
    assert "BROKEN_KEY" in body["deployments"]["broken"]["reason"]
    assert "sk-good-SECRET" not in str(body)


async def test_gateway_with_keys_configured_but_unset_does_not_open_to_everyone(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession
) -> None:
    config = {
        "keys": [{"name": "team-a", "key": "${TEAM_A_KEY}"}],
        "deployments": [deployment("good", upstream.base_url)],
    }
    server = await make_gateway(config, {})

    async with http.post(server.make_url("/v1/completions"), json={"model": "good", "prompt": "hi"}) as response:
        status = response.status

    assert status == 401
    assert upstream.received == []


def test_a_key_repeated_in_one_mapping_is_an_error_with_its_line() -> None:
    text = "deployments: []\nserver: {port: 8080}\ndeployments: []\n"

    [problem] = problems_of(text)

    assert "'deployments' appears twice" in problem
    assert "line 3" in problem
