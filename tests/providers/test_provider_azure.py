"""`type: azure`: Azure OpenAI's address, version and key header; the body relayed as OpenAI's is."""

from __future__ import annotations

from typing import Any

import openai
import pytest
from pytest_aiohttp import AiohttpServer

from tests.conformance.fake_api import PROVIDER_KEY
from tests.conformance.fake_openai import AzureOpenAIFake
from tests.conformance.harness import DEPLOYMENT, sdk_on, start_fake
from tests.conftest import GatewayFactory


@pytest.fixture
async def fake(aiohttp_server: AiohttpServer) -> AzureOpenAIFake:
    return await start_fake(aiohttp_server, AzureOpenAIFake(deployment="instruct-east"))


def azure(fake: AzureOpenAIFake, **options: Any) -> dict[str, Any]:
    return {
        "type": "azure",
        "endpoint": fake.base_url,
        "azure_deployment": "instruct-east",
        "api_key": "${PROVIDER_KEY}",
        **options,
    }


async def test_url_version_and_key_header(make_gateway: GatewayFactory, fake: AzureOpenAIFake) -> None:
    async with sdk_on(make_gateway, azure(fake, api_version="2024-06-01")) as client:
        await client.completions.create(model=DEPLOYMENT, prompt="x")

    sent = fake.received[0]
    assert sent.path == "/openai/deployments/instruct-east/completions"
    assert sent.query == {"api-version": "2024-06-01"}
    assert sent.headers["api-key"] == PROVIDER_KEY
    assert "Authorization" not in sent.headers


async def test_every_completions_parameter_is_relayed(make_gateway: GatewayFactory, fake: AzureOpenAIFake) -> None:
    async with sdk_on(make_gateway, azure(fake)) as client:
        await client.completions.create(model=DEPLOYMENT, prompt="x", echo=True, suffix="!", best_of=2, logprobs=3)

    body = fake.received[0].body
    assert (body["echo"], body["suffix"], body["best_of"], body["logprobs"]) == (True, "!", 2, 3)


async def test_drop_params_removes_them_before_the_call(make_gateway: GatewayFactory, fake: AzureOpenAIFake) -> None:
    async with sdk_on(make_gateway, azure(fake, drop_params=["best_of", "user"])) as client:
        await client.completions.create(model=DEPLOYMENT, prompt="x", best_of=2, user="u", temperature=0.1)

    body = fake.received[0].body
    assert "best_of" not in body
    assert "user" not in body
    assert body["temperature"] == 0.1


async def test_an_unknown_azure_deployment_is_a_404_passed_through(
    make_gateway: GatewayFactory, fake: AzureOpenAIFake
) -> None:
    async with sdk_on(make_gateway, azure(fake, azure_deployment="not-there")) as client:
        with pytest.raises(openai.NotFoundError) as caught:
            await client.completions.create(model=DEPLOYMENT, prompt="x")

    assert "deployment for this resource does not exist" in caught.value.message
    assert caught.value.code == "DeploymentNotFound"


async def test_embeddings_go_to_azures_embeddings_address(make_gateway: GatewayFactory, fake: AzureOpenAIFake) -> None:
    async with sdk_on(make_gateway, azure(fake)) as client:
        answer = await client.embeddings.create(model=DEPLOYMENT, input=["a b", "c"], dimensions=4)

    sent = fake.received[0]
    assert sent.path == "/openai/deployments/instruct-east/embeddings"
    assert sent.headers["api-key"] == PROVIDER_KEY
    assert "api-version" in sent.query
    assert (sent.body["input"], sent.body["dimensions"]) == (["a b", "c"], 4)
    assert [len(item.embedding) for item in answer.data] == [4, 4]
    assert answer.usage.prompt_tokens == 3
