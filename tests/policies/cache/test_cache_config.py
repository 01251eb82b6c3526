"""The cache's configuration as an operator writes it: `cache:`, `policies:`, `deployments[].policies`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import ClientSession

from gateway.config.loader import ConfigError, load_config, parse_config
from tests.conftest import GatewayFactory, deployment
from tests.support.cache_e2e_helpers import body, post
from tests.support.fake_upstream import FakeUpstream

REPO_CONFIG = Path(__file__).resolve().parents[3] / "config.yaml"
UPSTREAM = "http://127.0.0.1:9/v1"  # never contacted by the load-only tests


def problems_of(config: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(yaml.safe_dump(config), {}, source="test.yaml")
    return caught.value.problems


def test_an_unknown_policy_name_is_reported_at_its_yaml_path() -> None:
    config = {
        "deployments": [deployment("main", UPSTREAM, policies=["default", "typo"])],
        "policies": {"default": {"cache": {"ttl_s": 60}}},
    }

    assert problems_of(config) == [
        "deployments[0].policies[1]: deployment 'main' names policy 'typo', which is not defined under policies "
        "(defined: default)"
    ]


@pytest.mark.parametrize(
    ("section", "path"),
    [
        ({"policies": {"default": {"cache": {"ttl": 60}}}}, "policies.default.cache.ttl"),
        ({"policies": {"default": {"cache": {"ttl_s": 0}}}}, "policies.default.cache.ttl_s"),
        ({"policies": {"default": {"cahce": {}}}}, "policies.default.cahce"),
        ({"cache": {"redis_timeout_ms": 0}}, "cache.redis_timeout_ms"),
        ({"cache": {"memory_bytes": 10}}, "cache.memory_bytes"),
    ],
)
def test_cache_settings_are_checked_and_named_by_path(section: dict[str, Any], path: str) -> None:
    problems = problems_of({"deployments": [deployment("main", UPSTREAM)], **section})

    assert len(problems) == 1
    assert problems[0].startswith(f"{path}: ")


def test_group_members_with_different_cache_policies_are_warned_about() -> None:
    config = {
        "deployments": [
            deployment("a", UPSTREAM, aliases=["group"], policies=["cached"]),
            deployment("b", UPSTREAM, aliases=["group"]),
            deployment("c", UPSTREAM, aliases=["same"], policies=["cached"]),
            deployment("d", UPSTREAM, aliases=["same"], policies=["cached"]),
        ],
        "policies": {"cached": {"cache": {}}},
    }
    warnings = parse_config(yaml.safe_dump(config), {}).warnings

    group = [warning for warning in warnings if "cache polic" in warning]
    assert len(group) == 1
    assert "'group' (a, b)" in group[0]
    assert "policy of 'a'" in group[0]


async def test_the_first_policy_with_a_cache_block_applies(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession
) -> None:
    config = {
        "deployments": [
            deployment("cached", upstream.base_url, policies=["labels", "on", "off"]),
            deployment("disabled", upstream.base_url, policies=["off", "on"]),
        ],
        "policies": {"labels": {}, "on": {"cache": {}}, "off": {"cache": {"enabled": False}}},
    }
    gateway = await make_gateway(config)

    cached = [(await post(http, gateway, body(model="cached"))).cache for _ in range(2)]
    disabled = [(await post(http, gateway, body(model="disabled"))).cache for _ in range(2)]

    assert cached == ["MISS", "HIT"]
    assert disabled == ["BYPASS", "BYPASS"]


def test_the_repository_example_caches_its_openai_deployment() -> None:
    loaded = load_config(REPO_CONFIG, {})

    policies = loaded.config.policies
    instruct = loaded.deployments["instruct"].config
    assert instruct.policies
    assert any(policies[name].cache is not None for name in instruct.policies)
    assert loaded.config.cache.memory_max_bytes > 0
