"""The providers the conformance suite runs: adding a provider is one entry here (and its fake).

Each case names the config `type`, the loopback fake of its API, the `provider:` block that
points a deployment at that fake, and what the API cannot do (a parameter it cannot honour,
token-id prompts). The local inference engine joins with a case whose `provider` block needs no
fake address and whose `supports` leaves out the scripted HTTP failures it cannot have.

`NATIVE_RESPONSES` are the `openai` and `azure` cases with `responses: native`: their fakes' own
Responses API answers `/v1/responses`. They join the suites of the APIs such a deployment serves
differently or through another provider class (the Responses API's, chat's), not the others.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from tests.conformance.fake_anthropic import AnthropicFake
from tests.conformance.fake_api import FakeAPI
from tests.conformance.fake_chat import ChatCompletionsFake
from tests.conformance.fake_gemini import GeminiFake
from tests.conformance.fake_local import LocalModelFake
from tests.conformance.fake_openai import AzureOpenAIFake, OpenAICompletionsFake

CREDENTIAL = {"api_key": "${PROVIDER_KEY}"}
# Behaviours a case's fake can be scripted into; a case without one skips the tests that need it.
ALL_BEHAVIOURS = frozenset({"http_errors", "stall", "disconnect", "cut_stream"})


@dataclass(frozen=True)
class ProviderCase:
    type: str
    fake: Callable[[], FakeAPI]
    provider: Callable[[FakeAPI], dict[str, Any]]  # the `provider:` block, given the listening fake
    unsupported: tuple[str, Any] | None = None  # a parameter (and value) its API cannot honour
    token_prompts: bool = False  # it takes prompts as token ids
    supports: frozenset[str] = field(default=ALL_BEHAVIOURS)
    upstream: bool = True  # its fake receives the calls the gateway makes (the local engine makes none)
    chat_unsupported: tuple[str, Any] | None = None  # a chat parameter (and value) its API cannot honour
    tools: bool = True  # it can call tools (the local engine cannot tell tool calls from text)
    responses_native: bool = False  # `/v1/responses` goes to its fake's Responses API (`responses: native`)
    min_output_tokens: int = 1  # the least max_output_tokens its API takes (OpenAI's Responses API: 16)
    name: str = ""  # the test id, where it is not `type`

    def __str__(self) -> str:
        return self.name or self.type


CASES = [
    ProviderCase(
        "openai",
        OpenAICompletionsFake,
        lambda fake: {"type": "openai", "base_url": fake.base_url + "/v1", **CREDENTIAL},
        token_prompts=True,
    ),
    ProviderCase(
        "azure",
        lambda: AzureOpenAIFake(deployment="instruct-east"),
        lambda fake: {"type": "azure", "endpoint": fake.base_url, "azure_deployment": "instruct-east", **CREDENTIAL},
        token_prompts=True,
    ),
    ProviderCase(
        "openai-chat",
        ChatCompletionsFake,
        lambda fake: {"type": "openai-chat", "base_url": fake.base_url + "/v1", "model": "chat-model", **CREDENTIAL},
        unsupported=("echo", True),
    ),
    ProviderCase(
        "anthropic",
        AnthropicFake,
        lambda fake: {"type": "anthropic", "base_url": fake.base_url, "model": "claude-test", **CREDENTIAL},
        unsupported=("logprobs", 2),
        chat_unsupported=("logprobs", True),
    ),
    ProviderCase(
        "gemini",
        GeminiFake,
        lambda fake: {"type": "gemini", "base_url": fake.base_url, "model": "gemini-test", **CREDENTIAL},
        unsupported=("suffix", " and so on."),
        chat_unsupported=("logit_bias", {"42": 5}),
    ),
    ProviderCase(
        "local",
        LocalModelFake.start,
        LocalModelFake.provider_block,
        unsupported=("suffix", " and so on."),  # the model has no fill-in-the-middle tokens
        token_prompts=True,
        supports=frozenset(),
        upstream=False,
        chat_unsupported=("response_format", {"type": "json_object"}),
        tools=False,
    ),
]


def native_responses(case: ProviderCase) -> ProviderCase:
    """`case` with `responses: native`: `/v1/responses` goes to its fake's Responses API."""
    return replace(
        case,
        provider=lambda fake: {**case.provider(fake), "responses": "native"},
        responses_native=True,
        min_output_tokens=16,
        name=f"{case.type}-native-responses",
    )


NATIVE_RESPONSES = [native_responses(case) for case in CASES if case.type in ("openai", "azure")]
