"""Provider types by their config `type`: the options model that checks the block, and a factory."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pydantic import BaseModel

from providers.base import Provider
from providers.openai_compat import OpenAICompatibleOptions, OpenAICompatibleProvider


@dataclass(frozen=True, slots=True)
class ProviderType:
    options: type[BaseModel]
    # (deployment name, validated options, credential or None) -> provider
    create: Callable[[str, BaseModel, str | None], Provider]


def _openai_compatible(deployment: str, options: BaseModel, credential: str | None) -> Provider:
    assert isinstance(options, OpenAICompatibleOptions)
    return OpenAICompatibleProvider(deployment, options, credential)


PROVIDER_TYPES: dict[str, ProviderType] = {
    "openai": ProviderType(OpenAICompatibleOptions, _openai_compatible),
}
