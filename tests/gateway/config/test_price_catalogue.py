"""`price: auto`: a deployment priced from the `genai-prices` catalogue, looked up when the config
loads. Every expected figure is the catalogue's own calculation (`genai_prices.calc_price`) of the
usage the fake upstream reports, so the tests hold whatever the catalogue's prices are: the cost
header, the spend and the budgets charge what the provider bills, cached prompt tokens and
long-context tiers included."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
import yaml
from aiohttp import ClientSession, web
from aiohttp.test_utils import TestServer
from genai_prices import Usage, calc_price
from pytest_aiohttp import AiohttpServer

from gateway.config.loader import ConfigError, parse_config
from tests.conformance.fake_anthropic import AnthropicFake
from tests.conformance.fake_api import PROVIDER_KEY, Verbatim
from tests.conformance.fake_gemini import GeminiFake
from tests.conformance.harness import start_fake
from tests.conftest import GatewayFactory, deployment, upstream_url
from tests.gateway.config.test_cli import run_gateway, write
from tests.support.fake_upstream import FakeUpstream, chat_completion

TEAM_KEY = "gw-team-catalogue-0123456789abcdef"
ADMIN_KEY = "adm-catalogue-" + "0123456789abcdef" * 2
ENV = {"TEAM": TEAM_KEY, "ADMIN": ADMIN_KEY, "PROVIDER_KEY": PROVIDER_KEY}
NANO = Decimal("0.000000001")
ROOT = Path(__file__).resolve().parents[3]


def catalogue_usd(model: str, provider: str, *, at: datetime | None = None, **usage: int) -> Decimal:
    """What the catalogue says the usage costs, to the nano-dollar the gateway states."""
    total = calc_price(Usage(**usage), model, provider_id=provider, genai_request_timestamp=at).total_price
    return total.quantize(NANO)


def reporting(prompt: int, completion: int, cached: int) -> Any:
    """An OpenAI upstream whose answers report this usage."""

    async def behaviour(request: web.Request, body: dict[str, Any]) -> web.StreamResponse:
        answer = chat_completion(body)
        answer["usage"] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached},
        }
        return web.json_response(answer)

    return behaviour


async def cost_of_one_chat(http: ClientSession, gateway: TestServer, model: str) -> Decimal | None:
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 16}
    headers = {"Authorization": f"Bearer {TEAM_KEY}"}
    async with http.post(gateway.make_url("/v1/chat/completions"), json=body, headers=headers) as response:
        assert response.status == 200, await response.text()
        cost = response.headers.get("x-gateway-cost-usd")
    return Decimal(cost) if cost is not None else None


def openai_config(upstream: FakeUpstream, *deployments: dict[str, Any]) -> dict[str, Any]:
    return {
        "deployments": list(deployments),
        "keys": [{"name": "team", "key": "${TEAM}"}],
        "admin": {"key": "${ADMIN}"},
    }


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-4o-mini", "gpt-4.1", "o3-mini"])
async def test_price_auto_charges_an_openai_model_as_the_catalogue_prices_it_cached_tokens_included(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession, model: str
) -> None:
    priced = deployment("priced", upstream_url(upstream), provider={"model": model}, price="auto", retries=0)
    gateway = await make_gateway(openai_config(upstream, priced), ENV)
    upstream.script(reporting(prompt=12_345, completion=678, cached=4_096))

    cost = await cost_of_one_chat(http, gateway, "priced")

    fresh = catalogue_usd(model, "openai", input_tokens=12_345, cache_read_tokens=4_096, output_tokens=678)
    assert cost == fresh
    # The cached tokens are cheaper than fresh ones (else the catalogue's cache price was not taken).
    assert cost < catalogue_usd(model, "openai", input_tokens=12_345, output_tokens=678)


async def test_an_explicit_price_wins_over_the_catalogue_in_whole_or_price_by_price(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession
) -> None:
    url, model = upstream_url(upstream), {"model": "gpt-4o"}
    gateway = await make_gateway(
        openai_config(
            upstream,
            deployment("written", url, provider=model, price={"prompt_per_1m": 1, "completion_per_1m": 2}),
            deployment("overridden", url, provider=model, price={"auto": True, "completion_per_1m": 2}),
            deployment("named", url, provider={"model": "my-azure-gpt"}, price={"auto": "gpt-4o-mini"}),
        ),
        ENV,
    )
    upstream.script(*[reporting(prompt=10_000, completion=1_000, cached=0)] * 3)

    assert await cost_of_one_chat(http, gateway, "written") == Decimal("0.012")  # 10k x $1 + 1k x $2 per 1M
    catalogue_prompt = catalogue_usd("gpt-4o", "openai", input_tokens=10_000)
    assert await cost_of_one_chat(http, gateway, "overridden") == catalogue_prompt + Decimal("0.002")
    mini = catalogue_usd("gpt-4o-mini", "openai", input_tokens=10_000, output_tokens=1_000)
    assert await cost_of_one_chat(http, gateway, "named") == mini


async def test_a_price_that_changes_with_the_time_of_day_is_charged_at_its_highest(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession
) -> None:
    priced = deployment("ds", upstream_url(upstream), provider={"model": "deepseek-chat"}, price="auto")
    gateway = await make_gateway(openai_config(upstream, priced), ENV)
    upstream.script(reporting(prompt=100_000, completion=10_000, cached=20_000))

    cost = await cost_of_one_chat(http, gateway, "ds")

    midnight = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    day = {
        catalogue_usd(
            "deepseek-chat",
            "deepseek",
            at=midnight + timedelta(minutes=15 * step),
            input_tokens=100_000,
            cache_read_tokens=20_000,
            output_tokens=10_000,
        )
        for step in range(96)
    }
    assert len(day) > 1  # the catalogue's off-peak discount
    assert cost == max(day)


@pytest.fixture
async def gemini(aiohttp_server: AiohttpServer) -> GeminiFake:
    return await start_fake(aiohttp_server, GeminiFake())


def gemini_answer(prompt: int, cached: int, output: int) -> Verbatim:
    usage = {"promptTokenCount": prompt, "cachedContentTokenCount": cached, "candidatesTokenCount": output}
    candidate = {"content": {"role": "model", "parts": [{"text": "ok"}]}, "finishReason": "STOP", "index": 0}
    return Verbatim(json={"candidates": [candidate], "usageMetadata": usage})


async def test_a_long_prompt_pays_the_catalogues_long_context_tier_on_every_token(
    make_gateway: GatewayFactory, gemini: GeminiFake
) -> None:
    provider = {"type": "gemini", "base_url": gemini.base_url, "model": "gemini-2.5-pro", "api_key": "${PROVIDER_KEY}"}
    config = {"deployments": [{"name": "pro", "provider": provider, "price": "auto", "retries": 0}]}
    gateway = await make_gateway(config, ENV)
    gemini.script(gemini_answer(150_000, 40_000, 2_000), gemini_answer(250_000, 40_000, 2_000))

    costs = []
    async with openai.AsyncOpenAI(base_url=str(gateway.make_url("/v1")), api_key="-", max_retries=0) as client:
        for _ in range(2):
            answer = await client.chat.completions.with_raw_response.create(
                model="pro", messages=[{"role": "user", "content": "summarise"}]
            )
            costs.append(Decimal(answer.headers["x-gateway-cost-usd"]))

    short, long = (
        catalogue_usd("gemini-2.5-pro", "google", input_tokens=p, cache_read_tokens=40_000, output_tokens=2_000)
        for p in (150_000, 250_000)
    )
    assert costs == [short, long]
    # Past the threshold every token costs more, not only those beyond it.
    assert long > short * Decimal(250_000) / Decimal(150_000)


@pytest.fixture
async def claude(aiohttp_server: AiohttpServer) -> AnthropicFake:
    return await start_fake(aiohttp_server, AnthropicFake())


def claude_answer(fresh: int, written: int, read: int, output: int) -> Verbatim:
    usage = {
        "input_tokens": fresh,
        "cache_creation_input_tokens": written,
        "cache_read_input_tokens": read,
        "output_tokens": output,
    }
    message = {
        "id": "msg_catalogue",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "ok"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": usage,
    }
    return Verbatim(json=message)


async def test_prompt_cache_reads_and_writes_are_charged_at_the_catalogues_prices_in_spend_and_budget(
    make_gateway: GatewayFactory, claude: AnthropicFake, http: ClientSession
) -> None:
    cost = catalogue_usd(
        "claude-sonnet-4-5",
        "anthropic",
        input_tokens=1_000 + 2_000 + 4_000,
        cache_write_tokens=2_000,
        cache_read_tokens=4_000,
        output_tokens=100,
    )
    budget = cost + Decimal("0.0003")  # what is left after the first answer, if it is charged `cost`
    provider = {"type": "anthropic", "base_url": claude.base_url, "model": "claude-sonnet-4-5"}
    provider["api_key"] = "${PROVIDER_KEY}"
    config = {
        "deployments": [{"name": "sonnet", "provider": provider, "price": "auto", "retries": 0}],
        "keys": [{"name": "team", "key": "${TEAM}", "budget": {"cost_usd": float(budget), "period": "1d"}}],
        "admin": {"key": "${ADMIN}"},
    }
    gateway = await make_gateway(config, ENV)
    claude.script(claude_answer(fresh=1_000, written=2_000, read=4_000, output=100))
    messages: Any = [{"role": "user", "content": "hi"}]

    async with anthropic.AsyncAnthropic(base_url=str(gateway.make_url("")), api_key=TEAM_KEY, max_retries=0) as sdk:
        answer = await sdk.messages.with_raw_response.create(model="sonnet", max_tokens=100, messages=messages)
        assert Decimal(answer.headers["x-gateway-cost-usd"]) == cost
        with pytest.raises(anthropic.RateLimitError) as refused:
            await sdk.messages.create(model="sonnet", max_tokens=100, messages=messages)

    left = budget - cost
    assert f"more than the ${left.normalize()} left" in str(refused.value)
    admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
    async with http.get(gateway.make_url("/admin/keys/team/usage"), headers=admin) as response:
        spent = await response.json()
    assert Decimal(str(spent["cost_usd"])) == cost
    assert len(claude.received) == 1  # the refused request never reached Anthropic


def test_price_auto_is_looked_up_once_when_the_config_loads() -> None:
    provider = {"type": "anthropic", "model": "claude-sonnet-4-5", "api_key": "${PROVIDER_KEY}"}
    config = {"deployments": [{"name": "sonnet", "provider": provider, "price": "auto"}]}
    loaded = parse_config(yaml.safe_dump(config), ENV)
    price = loaded.deployments["sonnet"].price
    assert price is not None
    assert loaded.deployments["sonnet"].price_source.endswith("anthropic claude-sonnet-4-5")
    # What the catalogue bills a million tokens of each kind, and past its long-context threshold.
    one_of_each = price.cost_per_1m(3_000_000, 1_000_000, cached_tokens=1_000_000, cache_write_tokens=1_000_000)
    assert Decimal(str(one_of_each)) / 10**6 == catalogue_usd(
        "claude-sonnet-4-5",
        "anthropic",
        input_tokens=3_000_000,
        cache_read_tokens=1_000_000,
        cache_write_tokens=1_000_000,
        output_tokens=1_000_000,
    )
    below = price.cost_per_1m(200_000, 0)
    assert Decimal(str(below)) / 10**6 == catalogue_usd("claude-sonnet-4-5", "anthropic", input_tokens=200_000)


def test_a_misspelt_auto_is_a_problem_naming_the_price() -> None:
    config = {"deployments": [{"name": "d", "provider": {"type": "mock"}, "price": "atuo"}]}
    with pytest.raises(ConfigError) as caught:
        parse_config(yaml.safe_dump(config), {})
    assert any(p.startswith("deployments[0].price: 'price' is 'auto'") for p in caught.value.problems)


def test_check_config_warns_of_a_model_the_catalogue_does_not_know_and_still_passes(tmp_path: Path) -> None:
    config = {
        "deployments": [
            {
                "name": "in-house",
                "provider": {"type": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "acme-internal-7b"},
                "price": "auto",
            },
            {
                "name": "known",
                "provider": {"type": "openai", "base_url": "https://api.openai.com/v1", "model": "gpt-4o"},
                "price": "auto",
            },
        ]
    }
    # This checkout's code, whichever checkout the console script was installed from.
    run = run_gateway("check-config", "-c", str(write(tmp_path, config)), env={"PYTHONPATH": str(ROOT)})

    assert run.returncode == 0, run.stderr
    assert "warning: deployment 'in-house': price: auto found no price for model 'acme-internal-7b'" in run.stdout
    assert "deployment known: provider openai, price from genai-prices" in run.stdout
    assert "known': price: auto" not in run.stdout


async def test_a_model_the_catalogue_does_not_know_has_no_price_as_without_one(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession
) -> None:
    unknown = deployment("in-house", upstream_url(upstream), provider={"model": "acme-internal-7b"}, price="auto")
    gateway = await make_gateway(openai_config(upstream, unknown), ENV)
    upstream.script(reporting(prompt=1_000, completion=100, cached=0))

    assert await cost_of_one_chat(http, gateway, "in-house") is None


def test_written_tiers_bill_every_token_of_a_prompt_past_the_threshold() -> None:
    price = {"prompt_per_1m": 1, "completion_per_1m": 2, "tiers": [{"above_prompt_tokens": 1_000, "prompt_per_1m": 3}]}
    config = {"deployments": [{"name": "d", "provider": {"type": "mock"}, "price": price}]}
    loaded = parse_config(yaml.safe_dump(config), {}).deployments["d"].price
    assert loaded is not None
    assert loaded.cost_per_1m(1_000, 10) == 1_000 * 1 + 10 * 2
    assert loaded.cost_per_1m(1_001, 10) == 1_001 * 3 + 10 * 2  # the completion price is the base one

    price["tiers"] = [{"above_prompt_tokens": 5_000}, {"above_prompt_tokens": 1_000}]
    with pytest.raises(ConfigError) as caught:
        parse_config(yaml.safe_dump(config), {})
    assert caught.value.problems == [
        "deployments[0].price.tiers: tiers must be in increasing order of above_prompt_tokens; got [5000, 1000]"
    ]


async def test_a_price_of_cache_writes_alone_charges_the_same_in_the_cost_header_and_the_budget(
    make_gateway: GatewayFactory, claude: AnthropicFake, http: ClientSession
) -> None:
    provider = {"type": "anthropic", "base_url": claude.base_url, "model": "claude-x", "api_key": "${PROVIDER_KEY}"}
    price = {"prompt_per_1m": 3, "completion_per_1m": 15, "cache_write_per_1m": 3.75}
    config = {
        "deployments": [{"name": "sonnet", "provider": provider, "price": price, "retries": 0}],
        "keys": [{"name": "team", "key": "${TEAM}", "budget": {"cost_usd": 1, "period": "1d"}}],
        "admin": {"key": "${ADMIN}"},
    }
    gateway = await make_gateway(config, ENV)
    claude.script(claude_answer(fresh=1_000, written=2_000, read=0, output=100))

    async with anthropic.AsyncAnthropic(base_url=str(gateway.make_url("")), api_key=TEAM_KEY, max_retries=0) as sdk:
        answer = await sdk.messages.with_raw_response.create(
            model="sonnet", max_tokens=100, messages=[{"role": "user", "content": "hi"}]
        )

    # 1,000 fresh x $3 + 2,000 written x $3.75 + 100 x $15 per million tokens
    assert answer.headers["x-gateway-cost-usd"] == "0.012"
    async with http.get(
        gateway.make_url("/admin/keys/team/usage"), headers={"Authorization": f"Bearer {ADMIN_KEY}"}
    ) as r:
        assert Decimal(str((await r.json())["cost_usd"])) == Decimal("0.012")
