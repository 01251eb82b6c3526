"""`type: local` with `suffix`: fill-in-the-middle on a model that has FIM tokens, a 400 without them.

The FIM model's tokenizer has StarCoder's `<fim_prefix>`, `<fim_suffix>`, `<fim_middle>` and starts
every text with a BOS (as CodeLlama's does). What the model read is checked against the same model
run independently on the expected token ids: the logprobs of its answer are those of that exact
sequence, and any other order would give other logprobs (the model is random, so every context
has its own distribution).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest

torch = pytest.importorskip("torch", reason="the local engine needs the 'local' extra")
transformers = pytest.importorskip("transformers")

from providers.local.text.detokenizer import token_text  # noqa: E402
from tests.conftest import GatewayFactory  # noqa: E402
from tests.support.local_model import FIM, fim_model_dir, load_reference, random_model_dir  # noqa: E402

PREFIX, SUFFIX = "the sky", " red apples"
EOS = 0
NO_EOS = {str(EOS): -100}


@pytest.fixture(scope="module")
def reference() -> tuple[Any, Any]:
    return load_reference(fim_model_dir())


@pytest.fixture
async def client(make_gateway: GatewayFactory) -> AsyncIterator[openai.AsyncOpenAI]:
    deployments = [
        {"name": name, "provider": {"type": "local", "model": str(folder), "threads": 1}, "retries": 0}
        for name, folder in (("fim", fim_model_dir()), ("plain", random_model_dir()))
    ]
    gateway = await make_gateway({"deployments": deployments})
    async with openai.AsyncOpenAI(base_url=str(gateway.make_url("/v1")), api_key="unused", max_retries=0) as sdk:
        yield sdk


def next_logprobs(model: Any, ids: list[int]) -> Any:
    """The next token's logprobs after `ids`, end-of-text banned as the requests ban it."""
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, -1].float()
    logits[EOS] -= 100
    return torch.log_softmax(logits, dim=-1)


def greedy(model: Any, ids: list[int], steps: int) -> list[int]:
    tokens = list(ids)
    for _ in range(steps):
        tokens.append(int(next_logprobs(model, tokens).argmax()))
    return tokens[len(ids) :]


def fim_ids(tokenizer: Any, prefix: list[int], *, bos: bool) -> list[int]:
    fim_prefix, fim_suffix, fim_middle = (tokenizer.convert_tokens_to_ids(token) for token in FIM)
    suffix = tokenizer.encode(SUFFIX, add_special_tokens=False)
    return [*([tokenizer.bos_token_id] if bos else []), fim_prefix, *prefix, fim_suffix, *suffix, fim_middle]


@pytest.mark.parametrize("prompt_as", ["text", "token ids"])
async def test_suffix_puts_prefix_suffix_and_middle_in_order(
    client: openai.AsyncOpenAI, reference: Any, prompt_as: str
) -> None:
    model, tokenizer = reference
    prefix = tokenizer.encode(PREFIX, add_special_tokens=False)
    # A text prompt gets the tokenizer's BOS in front of everything; token ids are used as given.
    expected = fim_ids(tokenizer, prefix, bos=prompt_as == "text")
    prompt: str | list[int] = PREFIX if prompt_as == "text" else prefix

    completion = await client.completions.create(
        model="fim", prompt=prompt, suffix=SUFFIX, max_tokens=4, temperature=0, logprobs=5, logit_bias=NO_EOS
    )

    assert completion.usage is not None
    assert completion.usage.prompt_tokens == len(expected)
    logprobs = completion.choices[0].logprobs
    assert logprobs is not None
    assert logprobs.tokens == [token_text(tokenizer, token) for token in greedy(model, expected, 4)]
    best = next_logprobs(model, expected).topk(5)
    assert logprobs.top_logprobs is not None
    first = logprobs.top_logprobs[0]
    for token, value in zip(best.indices.tolist(), best.values.tolist(), strict=True):
        assert first[token_text(tokenizer, token)] == pytest.approx(value, abs=1e-4)


async def test_suffix_and_echo_together_are_a_400(client: openai.AsyncOpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        await client.completions.create(model="fim", prompt=PREFIX, suffix=SUFFIX, echo=True, max_tokens=1)

    assert caught.value.param == "suffix"


async def test_suffix_without_fim_tokens_is_a_400_naming_it(client: openai.AsyncOpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        await client.completions.create(model="plain", prompt=PREFIX, suffix=SUFFIX, max_tokens=1)

    assert caught.value.param == "suffix"
    assert "'suffix': this model has no fill-in-the-middle tokens" in caught.value.message
