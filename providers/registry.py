"""Provider types by their config `type`: the options model that checks the block, and a factory."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from providers import anthropic, azure, gemini, local, mock, openai_chat
from providers.base import Provider
from providers.native import anthropic as native_anthropic
from providers.native import openai_responses
from providers.openai_compat import OpenAICompatibleOptions


@dataclass(frozen=True, slots=True)
class ProviderType:
    options: type[BaseModel]
    # (deployment name, validated options, credential or None) -> provider
    create: Callable[[str, BaseModel, str | None], Provider]


def _typed(options: type[Any], create: Callable[[str, Any, str | None], Provider]) -> ProviderType:
    """A provider type whose factory is only ever given its own options model."""

    def checked(deployment: str, given: BaseModel, credential: str | None) -> Provider:
        assert isinstance(given, options)
        return create(deployment, given, credential)

    return ProviderType(options, checked)


PROVIDER_TYPES: dict[str, ProviderType] = {
    "openai": _typed(OpenAICompatibleOptions, openai_responses.create),
    "azure": _typed(azure.AzureOpenAIOptions, azure.create),
    "openai-chat": _typed(openai_chat.OpenAIChatOptions, openai_chat.create),
    "anthropic": _typed(anthropic.AnthropicOptions, native_anthropic.create),
    "gemini": _typed(gemini.GeminiOptions, gemini.create),
    "local": _typed(local.LocalOptions, local.create),
    "mock": _typed(mock.MockOptions, mock.create),
}
