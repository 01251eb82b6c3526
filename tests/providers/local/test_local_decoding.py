"""`type: local`: the Completions semantics of the in-process engine, end to end with the `openai` SDK.

The model is the tiny random GPT-2 of `tests.support.local_model`: its text is noise, so these tests force
tokens with logit_bias, compare token ids, and check against the same model run independently
(transformers' own forward pass and greedy `generate`).
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest

torch = pytest.importorskip("torch", reason="the local engine needs the 'local' extra")
transformers = pytest.importorskip("transformers")

from providers.local.text.detokenizer import token_text  # noqa: E402  (how logprobs spell a token)
from tests.conftest import GatewayFactory  # noqa: E402
from tests.support.local_model import SCRIPTED_TEXT, load_reference, random_model_dir, scripted_end_of_turn_model_dir  # noqa: E402

SKY = 267  # " sky" in the fixture's tokenizer
THE = 263  # "the"
EOS = 0


@pytest.fixture(scope="module")
def reference() -> tuple[Any, Any]:
    return load_reference(random_model_dir())


@pytest.fixture
async def client(make_gateway: GatewayFactory) -> AsyncIterator[openai.AsyncOpenAI]:
    provider = {"type": "local", "model": str(random_model_dir()), "threads": 1}
    config = {"deployments": [{"name": "tiny", "provider": provider, "timeout_s": 30, "retries": 0}]}
    gateway = await make_gateway(config)
    async with openai.AsyncOpenAI(base_url=str(gateway.make_url("/v1")), api_key="unused", max_retries=0) as sdk:
        yield sdk


async def complete(client: openai.AsyncOpenAI, **request: Any) -> Any:
    extra = {name: request.pop(name) for name in ("logit_bias",) if name in request}
    return await client.completions.create(model="tiny", **request, extra_body=extra or None)


def reference_greedy(model: Any, prompt: list[int], steps: int, bias: dict[int, float], frequency: float = 0.0,
                     presence: float = 0.0) -> list[int]:  # fmt: skip
    """Greedy decoding without a cache, with logit_bias and OpenAI's penalties applied by hand."""
    ids = list(prompt)
    counts = torch.zeros(model.config.vocab_size)
    for _ in range(steps):
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0, -1].float()
        for token, value in bias.items():
            logits[token] += value
        logits -= counts * frequency + (counts > 0).float() * presence
        token = int(logits.argmax())
        counts[token] += 1
        ids.append(token)
    return ids[len(prompt) :]


async def test_logit_bias_forces_a_token(client: openai.AsyncOpenAI) -> None:
    completion = await complete(client, prompt="the", max_tokens=5, logit_bias={str(SKY): 100})

    choice = completion.choices[0]
    assert (choice.text, choice.finish_reason) == (" sky" * 5, "length")
    assert completion.usage.completion_tokens == 5
    assert completion.usage.prompt_tokens == 1


async def test_greedy_decoding_matches_transformers_generate(client: openai.AsyncOpenAI, reference: Any) -> None:
    model, tokenizer = reference
    prompt = tokenizer.encode("hello world, the model")
    with torch.no_grad():
        expected = model.generate(torch.tensor([prompt]), max_new_tokens=20, do_sample=False, min_new_tokens=20)
    expected_text = tokenizer.decode(expected[0, len(prompt) :])

    completion = await complete(client, prompt=prompt, max_tokens=20, temperature=0, logit_bias={str(EOS): -100})

    assert completion.choices[0].text == expected_text.replace("\ufffd", "")


async def test_penalties_and_logit_bias_follow_openai_definitions(client: openai.AsyncOpenAI, reference: Any) -> None:
    model, tokenizer = reference
    prompt = tokenizer.encode("the quick brown fox")
    bias = {SKY: 3.0, THE: 3.0, EOS: -100.0}
    for frequency, presence in [(0.0, 0.0), (1.5, 0.0), (0.0, 2.0), (-0.5, 1.0)]:
        expected = reference_greedy(model, prompt, 12, bias, frequency, presence)

        completion = await complete(
            client,
            prompt=prompt,
            max_tokens=12,
            temperature=0,
            logprobs=0,
            frequency_penalty=frequency,
            presence_penalty=presence,
            logit_bias={str(token): value for token, value in bias.items()},
        )

        assert completion.choices[0].logprobs.tokens == [tokenizer.decode([token]) for token in expected]


async def test_logit_bias_counts_once_for_each_of_n_samples(client: openai.AsyncOpenAI, reference: Any) -> None:
    model, tokenizer = reference
    prompt = tokenizer.encode("the")
    with torch.no_grad():
        logits = model(torch.tensor([prompt])).logits[0, -1].float()
    # End of text biased away too: a sample that drew it would have no token (and no logprobs) to check.
    bias = {SKY: 3.0, tokenizer.eos_token_id: -100.0}
    for token, value in bias.items():
        logits[token] += value
    expected = torch.log_softmax(logits, dim=-1)

    completion = await complete(
        client, prompt=prompt, n=3, max_tokens=1, logprobs=5, logit_bias={str(t): v for t, v in bias.items()}
    )

    best = expected.topk(5)
    for choice in completion.choices:  # the samples share one prefill's logits; each adds the bias once
        top = choice.logprobs.top_logprobs[0]
        for token, value in zip(best.indices.tolist(), best.values.tolist(), strict=True):
            assert top[token_text(tokenizer, token)] == pytest.approx(value, abs=1e-4)


async def test_seed_repeats_the_sample_and_another_seed_changes_it(client: openai.AsyncOpenAI) -> None:
    async def tokens(seed: int) -> list[list[str]]:
        completion = await complete(client, prompt="the sky", max_tokens=16, n=2, seed=seed, logprobs=0)
        return [choice.logprobs.tokens for choice in completion.choices]

    first, again, other = await tokens(7), await tokens(7), await tokens(8)

    assert first == again
    assert first[0] != first[1]  # each of the n samples draws its own numbers
    assert other != first


async def test_echo_scores_the_prompt_like_an_independent_forward_pass(
    client: openai.AsyncOpenAI, reference: Any
) -> None:
    model, tokenizer = reference
    text = "the quick brown fox jumps"
    ids = tokenizer.encode(text)
    with torch.no_grad():
        logprobs = torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), dim=-1)

    completion = await complete(client, prompt=text, max_tokens=0, echo=True, logprobs=3)

    choice = completion.choices[0]
    assert (choice.text, choice.finish_reason) == (text, "length")
    assert choice.logprobs.tokens == [tokenizer.decode([token]) for token in ids]
    assert choice.logprobs.token_logprobs[0] is None
    assert choice.logprobs.top_logprobs[0] is None
    expected = [float(logprobs[position, token]) for position, token in enumerate(ids[1:])]
    assert choice.logprobs.token_logprobs[1:] == pytest.approx(expected, abs=1e-4)
    for position, top in enumerate(choice.logprobs.top_logprobs[1:]):
        best = logprobs[position].topk(3)
        for token, value in zip(best.indices.tolist(), best.values.tolist(), strict=True):
            assert top[token_text(tokenizer, token)] == pytest.approx(value, abs=1e-4)
        assert choice.logprobs.tokens[position + 1] in top  # the prompt's own token is always there
    assert choice.logprobs.text_offset == [len(tokenizer.decode(ids[:k])) for k in range(len(ids))]
    assert completion.usage.completion_tokens == 0
    assert completion.usage.prompt_tokens == len(ids)


async def test_logprobs_have_openai_shape_and_reflect_logit_bias(client: openai.AsyncOpenAI) -> None:
    completion = await complete(
        client, prompt="the", max_tokens=8, logprobs=2, seed=3, echo=True, logit_bias={str(SKY): 50, str(THE): 50}
    )

    choice = completion.choices[0]
    lp = choice.logprobs
    assert choice.text == "the" + "".join(lp.tokens[1:])
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset) == 9
    assert set(lp.tokens[1:]) <= {" sky", "the"}
    assert lp.text_offset == [sum(len(token) for token in lp.tokens[:k]) for k in range(9)]
    for token, logprob, top in zip(lp.tokens[1:], lp.token_logprobs[1:], lp.top_logprobs[1:], strict=True):
        assert top[token] == logprob
        assert set(top) == {" sky", "the"}  # the two boosted tokens are the two most likely
        assert math.exp(top[" sky"]) + math.exp(top["the"]) == pytest.approx(1.0, abs=1e-3)


async def test_best_of_returns_the_sample_with_the_highest_mean_logprob(client: openai.AsyncOpenAI) -> None:
    no_eos = {str(EOS): -100}
    candidates = await complete(client, prompt="red apples", max_tokens=6, n=4, seed=11, logprobs=0, logit_bias=no_eos)
    best = await complete(client, prompt="red apples", max_tokens=6, n=1, best_of=4, seed=11, logit_bias=no_eos)

    means = {c.text: sum(c.logprobs.token_logprobs) / 6 for c in candidates.choices}
    assert len(means) == 4
    assert [c.text for c in best.choices] == [max(means, key=lambda text: means[text])]
    assert best.usage.completion_tokens == 4 * 6  # every sample counts, not only the returned one


async def test_best_of_with_n_returns_the_n_best_in_order(client: openai.AsyncOpenAI) -> None:
    no_eos = {str(EOS): -100}
    request: dict[str, Any] = {"prompt": ["the sky", "red"], "max_tokens": 5, "seed": 5, "logit_bias": no_eos}
    candidates = await complete(client, n=3, logprobs=0, **request)
    best = await complete(client, n=2, best_of=3, **request)

    for prompt in range(2):
        ranked = sorted(candidates.choices[prompt * 3 : prompt * 3 + 3], key=lambda c: -sum(c.logprobs.token_logprobs))
        assert [c.text for c in best.choices[prompt * 2 : prompt * 2 + 2]] == [c.text for c in ranked[:2]]
    assert [c.index for c in best.choices] == [0, 1, 2, 3]


async def test_the_four_prompt_forms(client: openai.AsyncOpenAI, reference: Any) -> None:
    _, tokenizer = reference
    greedy: dict[str, Any] = {"max_tokens": 6, "temperature": 0, "logit_bias": {str(EOS): -100}}
    as_text = await complete(client, prompt="the sky", **greedy)
    as_texts = await complete(client, prompt=["the sky", "red apples"], **greedy)
    as_ids = await complete(client, prompt=tokenizer.encode("the sky"), **greedy)
    as_id_lists = await complete(client, prompt=[tokenizer.encode("red apples"), [SKY]], **greedy)

    sky, apples = as_texts.choices
    assert as_text.choices[0].text == sky.text == as_ids.choices[0].text
    assert as_id_lists.choices[0].text == apples.text
    assert as_texts.usage.prompt_tokens == 4
    assert as_id_lists.usage.prompt_tokens == 3


async def test_null_prompt_starts_a_new_document(client: openai.AsyncOpenAI) -> None:
    completion = await complete(client, prompt=None, max_tokens=3, echo=True, logit_bias={str(SKY): 100})

    assert completion.choices[0].text == "<|endoftext|>" + " sky" * 3


async def test_stop_string_cuts_the_text_plain_and_streamed(client: openai.AsyncOpenAI) -> None:
    request: dict[str, Any] = {"prompt": "the", "max_tokens": 10, "logit_bias": {str(SKY): 100}, "stop": ["y s", "zz"]}
    plain = await complete(client, **request)
    stream = await client.completions.create(model="tiny", stream=True, **request)
    chunks = [chunk.choices[0] async for chunk in stream]

    assert (plain.choices[0].text, plain.choices[0].finish_reason) == (" sk", "stop")
    assert "".join(chunk.text for chunk in chunks) == " sk"
    assert not any("y" in chunk.text for chunk in chunks)  # the stop string's start was never shown
    assert chunks[-1].finish_reason == "stop"
    assert plain.usage.completion_tokens == 2  # the sampled tokens, stop string included


async def test_stream_gives_the_plain_answer_for_the_same_seed(client: openai.AsyncOpenAI) -> None:
    request: dict[str, Any] = {"prompt": ["the sky", "green"], "max_tokens": 12, "n": 2, "seed": 42, "logprobs": 1}
    plain = await complete(client, **request)
    stream = await client.completions.create(
        model="tiny", stream=True, stream_options={"include_usage": True}, **request
    )
    texts: dict[int, str] = {}
    tokens: dict[int, list[str]] = {}
    usage = None
    async for chunk in stream:
        usage = chunk.usage or usage
        for choice in chunk.choices:
            texts[choice.index] = texts.get(choice.index, "") + choice.text
            tokens.setdefault(choice.index, []).extend(choice.logprobs.tokens if choice.logprobs else [])

    assert texts == {c.index: c.text for c in plain.choices}
    assert tokens == {c.index: c.logprobs.tokens for c in plain.choices}
    assert usage is not None
    assert usage.model_dump() == plain.usage.model_dump()


async def test_streamed_text_never_splits_a_character(client: openai.AsyncOpenAI, reference: Any) -> None:
    _, tokenizer = reference
    byte_tokens = {token for token in tokenizer.encode("日本 😀 ∑") if token != tokenizer.encode(" ")[0]}
    bias = {str(token): 4.0 for token in byte_tokens}  # the random model now samples loose bytes often
    stream = await client.completions.create(
        model="tiny", prompt="the", max_tokens=40, seed=1, stream=True, extra_body={"logit_bias": bias}
    )
    chunks = [chunk.choices[0].text async for chunk in stream]
    plain = await complete(client, prompt="the", max_tokens=40, seed=1, logprobs=0, logit_bias=bias)

    assert "".join(chunks) == plain.choices[0].text
    assert not any("\ufffd" in chunk for chunk in chunks)
    assert any(token.startswith("bytes:") for token in plain.choices[0].logprobs.tokens)
    assert any(ord(char) > 0x7FF for char in plain.choices[0].text)  # whole multi-byte characters came out


async def test_max_tokens_zero_without_echo_is_an_empty_answer(client: openai.AsyncOpenAI) -> None:
    completion = await complete(client, prompt="the sky", max_tokens=0)

    assert (completion.choices[0].text, completion.choices[0].finish_reason) == ("", "length")
    assert completion.usage.completion_tokens == 0


async def test_prompt_past_the_context_is_a_400_in_openai_words(client: openai.AsyncOpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        await complete(client, prompt=[SKY] * 60, max_tokens=10)

    assert "This model's maximum context length is 64 tokens, however you requested" in caught.value.message
    assert "70 tokens (60 in your prompt; 10 for the completion)" in caught.value.message
    assert caught.value.code == "context_length_exceeded"


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"suffix": "the end"}, "suffix"),
        ({"top_k": 5}, "top_k"),
        ({"logit_bias": {"100000": 1}}, "logit_bias"),
        ({"prompt": [100000]}, "prompt"),
    ],
)
async def test_what_the_engine_cannot_honour_is_a_400_naming_it(
    client: openai.AsyncOpenAI, extra: dict[str, Any], param: str
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        await client.completions.create(model="tiny", prompt="the", extra_body=extra)

    assert caught.value.param == param


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
async def test_every_end_token_the_model_names_ends_the_answer(make_gateway: GatewayFactory, stream: bool) -> None:
    """A model whose generation config lists an end-of-turn token beside the tokenizer's end-of-text
    (as chat models do) stops at it: the answer is not run on to max_tokens, nor the token's text shown."""
    folder = scripted_end_of_turn_model_dir()
    assert transformers.AutoTokenizer.from_pretrained(folder).eos_token == "<|endoftext|>"  # not the model's last
    provider = {"type": "local", "model": str(folder), "threads": 1}
    gateway = await make_gateway({"deployments": [{"name": "eot", "provider": provider, "retries": 0}]})
    async with openai.AsyncOpenAI(base_url=str(gateway.make_url("/v1")), api_key="unused", max_retries=0) as sdk:
        if not stream:
            answer = await sdk.completions.create(model="eot", prompt="the sky", max_tokens=20)
            text, finish = answer.choices[0].text, answer.choices[0].finish_reason
            assert answer.usage is not None
            assert answer.usage.completion_tokens == 3
        else:
            chunks = await sdk.completions.create(model="eot", prompt="the sky", max_tokens=20, stream=True)
            pieces = [chunk.choices[0] async for chunk in chunks if chunk.choices]
            text, finish = "".join(piece.text for piece in pieces), pieces[-1].finish_reason
    assert (text, finish) == (SCRIPTED_TEXT, "stop")
