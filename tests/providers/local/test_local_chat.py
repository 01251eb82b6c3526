"""`type: local` serving chat: the tokenizer's chat template, then the completions sampling path.
The model is the tiny random GPT-2 of `tests.support.local_model` with a chat template; the provider is
called directly with `api="chat"` and its answers parsed by the `openai` SDK's types."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk

torch = pytest.importorskip("torch", reason="the local engine needs the 'local' extra")

from gateway.api.errors import GatewayError  # noqa: E402
from providers.base import UpstreamRequest  # noqa: E402
from providers.local import LocalOptions, create  # noqa: E402
from providers.local.provider import LocalProvider  # noqa: E402
from tests.support.local_model import load_reference, random_chat_model_dir, random_model_dir  # noqa: E402

EOS = 0
MESSAGES = [{"role": "system", "content": "the sky"}, {"role": "user", "content": "red apples"}]


@pytest.fixture(scope="module")
def reference() -> tuple[Any, Any]:
    return load_reference(random_chat_model_dir())


async def provider_on(directory: Any) -> LocalProvider:
    created = create("tiny", LocalOptions(model=str(directory), threads=1), None)
    assert isinstance(created, LocalProvider)
    return created


@pytest.fixture
async def provider() -> AsyncIterator[LocalProvider]:
    created = await provider_on(random_chat_model_dir())
    yield created
    await created.aclose()


def request(**body: Any) -> UpstreamRequest:
    return UpstreamRequest({"model": "tiny", "messages": MESSAGES, **body}, "req", 30.0, api="chat")


async def chat(provider: LocalProvider, **body: Any) -> ChatCompletion:
    return ChatCompletion.model_validate((await provider.complete(request(**body))).body)


async def chunks_of(provider: LocalProvider, **body: Any) -> list[ChatCompletionChunk]:
    stream = await provider.stream(request(stream=True, **body))
    chunks = []
    async for payloads in stream:
        chunks += [ChatCompletionChunk.model_validate_json(payload) for payload in payloads]
    await stream.aclose()
    return chunks


async def test_greedy_chat_equals_transformers_greedy_decode_of_the_templated_prompt(
    provider: LocalProvider, reference: tuple[Any, Any]
) -> None:
    model, tokenizer = reference
    completion = await chat(provider, temperature=0, max_completion_tokens=12, logit_bias={str(EOS): -100})

    text = tokenizer.apply_chat_template(MESSAGES, tokenize=False, add_generation_prompt=True)
    prompt = tokenizer.encode(text, add_special_tokens=False)
    expected = model.generate(
        torch.tensor([prompt]), max_new_tokens=12, do_sample=False, suppress_tokens=[EOS], pad_token_id=EOS
    )[0, len(prompt) :].tolist()
    assert completion.object == "chat.completion"
    assert completion.choices[0].message.content == tokenizer.decode(expected)
    assert completion.choices[0].finish_reason == "length"
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (len(prompt), 12)


async def test_logprobs_in_the_chat_shape(provider: LocalProvider) -> None:
    completion = await chat(provider, max_completion_tokens=4, logprobs=True, top_logprobs=3, logit_bias={"267": 9})

    logprobs = completion.choices[0].logprobs
    assert logprobs is not None
    assert logprobs.content is not None
    assert len(logprobs.content) == 4
    assert completion.choices[0].message.content == " sky sky sky sky"
    assert [entry.token for entry in logprobs.content] == [" sky"] * 4
    for entry in logprobs.content:
        assert len(entry.top_logprobs) == 3
        values = [top.logprob for top in entry.top_logprobs]
        assert values == sorted(values, reverse=True)
        assert entry.logprob <= values[0]
        assert entry.bytes == list(entry.token.encode())


async def test_seed_n_stop_and_logit_bias(provider: LocalProvider) -> None:
    first = await chat(provider, seed=7, n=2, max_completion_tokens=6)
    again = await chat(provider, seed=7, n=2, max_completion_tokens=6)
    forced = await chat(provider, max_tokens=3, logit_bias={"267": 100})  # " sky"
    stopped = await chat(provider, max_tokens=3, logit_bias={"267": 100}, stop=" sky")

    assert [c.index for c in first.choices] == [0, 1]
    assert [c.message.content for c in first.choices] == [c.message.content for c in again.choices]
    assert forced.choices[0].message.content == " sky sky sky"
    assert (stopped.choices[0].message.content, stopped.choices[0].finish_reason) == ("", "stop")


async def test_stream_gives_the_plain_answer_with_role_and_usage(provider: LocalProvider) -> None:
    plain = await chat(provider, seed=3, max_completion_tokens=8)
    chunks = await chunks_of(provider, seed=3, max_completion_tokens=8, stream_options={"include_usage": True})

    assert chunks[0].choices[0].delta.role == "assistant"
    assert all(chunk.choices[0].delta.role is None for chunk in chunks[1:-1])
    assert "".join(chunk.choices[0].delta.content or "" for chunk in chunks[:-1]) == plain.choices[0].message.content
    assert chunks[-2].choices[0].finish_reason == "length"
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert plain.usage is not None
    assert chunks[-1].usage.completion_tokens == plain.usage.completion_tokens == 8


async def test_without_a_token_limit_the_answer_may_fill_the_context(provider: LocalProvider) -> None:
    completion = await chat(provider, logit_bias={str(EOS): -100})

    assert completion.usage is not None
    assert completion.usage.prompt_tokens + completion.usage.completion_tokens == 64  # the model's positions
    assert completion.choices[0].finish_reason == "length"


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools"),
        ({"response_format": {"type": "json_object"}}, "response_format"),
        (
            {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x"}}]}]},
            "messages[0].content[0]",
        ),
        ({"max_completion_tokens": 100}, "max_completion_tokens"),  # past the 64-token context
        ({"n": 100}, "n"),
    ],
)
async def test_what_the_engine_cannot_honour_is_a_400_naming_it(
    provider: LocalProvider, body: dict[str, Any], param: str
) -> None:
    with pytest.raises(GatewayError) as caught:
        await chat(provider, **body)
    assert (caught.value.status, caught.value.param) == (400, param)


async def test_a_model_without_a_chat_template_answers_a_clear_400() -> None:
    provider = await provider_on(random_model_dir())
    try:
        with pytest.raises(GatewayError) as caught:
            await chat(provider)
    finally:
        await provider.aclose()
    assert (caught.value.status, caught.value.param, caught.value.code) == (400, "messages", "chat_template_missing")
    assert "chat template" in caught.value.message
