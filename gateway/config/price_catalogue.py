"""`price: auto`: a deployment's prices from the `genai-prices` catalogue (a maintained data set of
the prices providers publish), looked up once when the config loads, never per request.

The catalogue's provider: the deployment's for an `anthropic`, `gemini` or `azure` deployment; for
an OpenAI-compatible one, the provider its `base_url` belongs to (api.openai.com, api.groq.com, …),
else the first whose models the name matches. The model: `price.auto` when it names one, else the
provider block's `model`, Azure's `azure_deployment`, or the deployment's name. Kept: the prompt,
completion, cache-read and cache-write prices per million tokens and their long-context tiers;
what the gateway does not meter (audio, images, web searches, batch and priority processing) is
left out. A price that changes with the time of day (off-peak discounts) is charged at its highest,
so that budgets never count short.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

import genai_prices
from genai_prices.data_snapshot import get_snapshot
from genai_prices.types import ModelInfo, ModelPrice, Provider, TieredPrices
from pydantic import BaseModel

from gateway.config.settings import DeploymentConfig, DeploymentPrice
from policies.limits.specs import Price, PriceTier

CATALOGUE = f"genai-prices {genai_prices.__version__}"
# The provider types whose catalogue provider is fixed; OpenAI-compatible ones are found by address.
_PROVIDERS = {"anthropic": "anthropic", "gemini": "google", "azure": "azure"}
_UNPRICED = frozenset({"local", "mock"})  # run here or simulated: nothing a provider bills
# The catalogue's price of each unit the gateway meters, and the setting it becomes.
_UNITS = {
    "input_mtok": "prompt_per_1m",
    "output_mtok": "completion_per_1m",
    "cache_read_mtok": "cached_prompt_per_1m",
    "cache_write_mtok": "cache_write_per_1m",
}
_TIERED = frozenset(PriceTier.model_fields) - {"above_prompt_tokens"}
_DAY_SAMPLES = 96  # each quarter hour: where the catalogue's time-of-day prices change


@dataclass(frozen=True, slots=True)
class CataloguePrice:
    price: Price | None  # None: not found, the deployment has no price
    source: str  # what was found, for check-config: "genai-prices 0.2.5: openai gpt-4o"
    warning: str | None = None


def catalogue_price(deployment: DeploymentConfig, options: BaseModel, now: datetime) -> CataloguePrice:
    """The price of a deployment whose `price` has `auto`; `now` (aware) picks the catalogue's
    prices in force (a provider's price change is taken at the next config load)."""
    setting = deployment.price
    assert setting is not None
    model = setting.auto if isinstance(setting.auto, str) else _model_of(deployment, options)
    kind = deployment.provider.type
    missing = f"deployment {deployment.name!r}: price: auto found no price for model {model!r}"
    if kind in _UNPRICED:
        return CataloguePrice(None, "", f"{missing}: a {kind!r} deployment has none in {CATALOGUE}; it has no price")
    try:
        provider, info = _find(kind, model, options)
    except LookupError:
        return CataloguePrice(
            None,
            "",
            f"{missing} in {CATALOGUE}: it has no price (no cost, nothing charged to cost budgets); write its "
            "prices, or name the catalogue's model with price: {auto: MODEL}",
        )
    prices, varies = _prices_in_force(info, now)
    if prices.input_mtok is None and prices.output_mtok is None:
        return CataloguePrice(None, "", f"{missing}: {CATALOGUE} prices {info.id!r} by other units than tokens")
    source = f"{CATALOGUE}: {provider.id} {info.id}"
    warning = None
    if varies:
        warning = (
            f"deployment {deployment.name!r}: {provider.id} {info.id}'s price changes with the time of day; "
            "it is charged at its highest"
        )
    return CataloguePrice(_with_written(_price(prices), setting), source, warning)


def _model_of(deployment: DeploymentConfig, options: BaseModel) -> str:
    for name in ("model", "azure_deployment"):
        value = getattr(options, name, None)
        if isinstance(value, str) and value:
            return value
    return deployment.name


def _find(kind: str, model: str, options: BaseModel) -> tuple[Provider, ModelInfo]:
    snapshot = get_snapshot()
    provider_id = _PROVIDERS.get(kind)
    if provider_id is not None:
        return snapshot.find_provider_model(model, None, provider_id, None)
    base_url = getattr(options, "base_url", None)
    try:
        provider = snapshot.find_provider(None, None, base_url) if isinstance(base_url, str) else None
    except LookupError:
        provider = None  # a self-hosted or unknown address: by the model's name alone
    if provider is None:
        return snapshot.find_provider_model(model, None, None, None)
    info = provider.find_model(model, all_providers=snapshot.providers)
    if info is None:
        raise LookupError(model)
    return provider, info


def _prices_in_force(model: ModelInfo, now: datetime) -> tuple[ModelPrice, bool]:
    """(the prices, whether they change with the time of day): the highest of the day's."""
    if isinstance(model.prices, ModelPrice):
        return model.prices, False
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    day: list[ModelPrice] = []
    for step in range(_DAY_SAMPLES):
        prices = model.get_prices(midnight + timedelta(minutes=15 * step))
        if prices not in day:
            day.append(prices)
    return max(day, key=lambda p: (_at(p.input_mtok, None) or 0.0, _at(p.output_mtok, None) or 0.0)), len(day) > 1


def _price(prices: ModelPrice) -> Price:
    """The catalogue's token prices as a `Price`: a tier at each threshold any of them changes at."""
    units = {setting: getattr(prices, unit) for unit, setting in _UNITS.items()}
    tiered = [value for value in units.values() if isinstance(value, TieredPrices)]
    thresholds = sorted({tier.start for value in tiered for tier in value.tiers})
    base = {setting: _at(value, None) for setting, value in units.items()}
    tiers = [
        PriceTier(
            above_prompt_tokens=threshold,
            **{s: _at(v, threshold) for s, v in units.items() if isinstance(v, TieredPrices)},
        )
        for threshold in thresholds
    ]
    return Price(
        prompt_per_1m=base["prompt_per_1m"] or 0.0,
        completion_per_1m=base["completion_per_1m"] or 0.0,
        cached_prompt_per_1m=base["cached_prompt_per_1m"],
        cache_write_per_1m=base["cache_write_per_1m"],
        tiers=tuple(tiers),
    )


def _at(value: Decimal | TieredPrices | None, threshold: int | None) -> float | None:
    """A unit's price for a prompt past `threshold` tokens (None: the base price)."""
    if value is None:
        return None
    if not isinstance(value, TieredPrices):
        return float(value)
    applies = [tier.price for tier in value.tiers if threshold is not None and tier.start <= threshold]
    return float(applies[-1] if applies else value.base)


def _with_written(found: Price, setting: DeploymentPrice) -> Price:
    """The catalogue's price with the prices the file writes beside `auto` winning, in every tier."""
    written = setting.written
    if not written:
        return found
    tiers = written.pop("tiers", None)
    if tiers is None:
        tiers = tuple(tier.model_copy(update=dict.fromkeys(_TIERED & written.keys())) for tier in found.tiers)
    return found.model_copy(update={**written, "tiers": tiers})
