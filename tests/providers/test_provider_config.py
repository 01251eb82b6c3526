"""The `provider:` blocks of the new provider types, as an operator writes them in config.yaml."""

from __future__ import annotations

import openai
import pytest
from pytest_aiohttp import AiohttpServer

from gateway.config.loader import ConfigError, parse_config
from tests.conformance.fake_anthropic import AnthropicFake
from tests.conformance.fake_api import PROVIDER_KEY
from tests.conformance.harness import DEPLOYMENT, start_fake
from tests.conftest import GatewayFactory

EXAMPLES = {
    "azure": "{type: azure, endpoint: 'https://res.openai.azure.com', azure_deployment: instruct, api_key: '${K}'}",
    "openai-chat": "{type: openai-chat, base_url: 'https://api.groq.com/openai/v1', model: llama, api_key: '${K}'}",
    "anthropic": "{type: anthropic, model: claude-sonnet-4-5, default_max_tokens: 1024, api_key: '${K}'}",
    "gemini": "{type: gemini, model: gemini-2.5-flash, drop_params: [user], api_key: '${K}'}",
}


def config_with(provider: str) -> str:
    return f"deployments:\n  - name: d\n    provider: {provider}\n"


@pytest.mark.parametrize("block", EXAMPLES.values(), ids=EXAMPLES.keys())
def test_documented_examples_load(block: str) -> None:
    loaded = parse_config(config_with(block), {"K": "secret-value"})

    assert loaded.deployments["d"].credential == "secret-value"
    assert loaded.deployments["d"].unavailable is None


@pytest.mark.parametrize(
    ("block", "problem"),
    [
        ("{type: anthropic, model: m, max_token: 5}", "deployments[0].provider.max_token: unknown setting"),
        ("{type: anthropic, model: m, default_max_tokens: 0}", "deployments[0].provider.default_max_tokens"),
        ("{type: gemini, drop_params: [prompt]}", "prompt cannot be dropped"),
        ("{type: azure, endpoint: 'https://x'}", "deployments[0].provider.azure_deployment: Field required"),
        ("{type: openai-chat, base_url: 'ftp://x'}", "deployments[0].provider.base_url"),
    ],
)
def test_mistakes_are_reported_by_their_yaml_path(block: str, problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(config_with(block), {})

    assert any(problem in line for line in caught.value.problems), caught.value.problems


def test_both_credentials_at_once_are_refused() -> None:
    text = "virtual_keys: [{name: vk, provider: anthropic, api_key: '${K}'}]\n" + config_with(
        "{type: anthropic, api_key: '${K}', virtual_key: vk}"
    )
    with pytest.raises(ConfigError) as caught:
        parse_config(text, {"K": "v"})

    assert any("either 'api_key' or 'virtual_key'" in line for line in caught.value.problems)


async def test_a_virtual_key_is_the_credential_sent_upstream(
    make_gateway: GatewayFactory, aiohttp_server: AiohttpServer
) -> None:
    fake = await start_fake(aiohttp_server, AnthropicFake())
    config = {
        "virtual_keys": [{"name": "claude-main", "provider": "anthropic", "api_key": "${PROVIDER_KEY}"}],
        "deployments": [
            {
                "name": DEPLOYMENT,
                "provider": {"type": "anthropic", "base_url": fake.base_url, "virtual_key": "claude-main"},
            }
        ],
    }
    gateway = await make_gateway(config, {"PROVIDER_KEY": PROVIDER_KEY})
    async with openai.AsyncOpenAI(base_url=str(gateway.make_url("/v1")), api_key="unused", max_retries=0) as client:
        completion = await client.completions.create(model=DEPLOYMENT, prompt="hi")

    assert fake.received[0].headers["x-api-key"] == PROVIDER_KEY
    assert completion.choices[0].text == "answer 0 to hi"
