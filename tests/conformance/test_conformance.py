"""The conformance suite: whatever API a deployment speaks upstream, the `openai` SDK gets the same
`text_completion` answers from it, plain and streamed, and the same errors."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any

import openai
import pytest
from openai import AsyncStream
from openai.types import Completion

from tests.conformance.cases import ProviderCase
from tests.conformance.conftest import DEPLOYMENT, StartGateway, needs, sdk_for
from tests.conformance.fake_api import CutStream, Fail, FakeAPI, SlowStream, Stall

PROMPTS = ["red apples", "green pears grow"]


async def collect(stream: AsyncStream[Completion]) -> tuple[dict[int, str], dict[int, str], list[Completion]]:
    """Each choice's text and finish reason, by index, and the chunks as they came."""
    texts: dict[int, str] = defaultdict(str)
    finishes: dict[int, str] = {}
    chunks = []
    async for chunk in stream:
        chunks.append(chunk)
        for choice in chunk.choices:
            texts[choice.index] += choice.text
            if choice.finish_reason is not None:
                finishes[choice.index] = choice.finish_reason
    return dict(texts), finishes, chunks


def by_prompt(texts: dict[int, str], n: int) -> list[list[str]]:
    """The texts of prompt i are at indices i*n … i*n + n-1 (in any order: samples are alike)."""
    return [sorted(texts[i * n + j] for j in range(n)) for i in range(len(texts) // n)]


def expected_samples(fake: FakeAPI, n: int, max_tokens: int = 16) -> list[list[str]]:
    return [sorted(fake.generate(prompt, j, max_tokens).text for j in range(n)) for prompt in PROMPTS]


async def test_plain_completion(client: openai.AsyncOpenAI, fake: FakeAPI) -> None:
    completion = await client.completions.create(model=DEPLOYMENT, prompt="the sky")

    expected = fake.generate("the sky")
    assert completion.object == "text_completion"
    assert [(c.index, c.text, c.finish_reason) for c in completion.choices] == [(0, expected.text, "stop")]
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (2, len(expected.pieces))
    assert completion.usage.total_tokens == 2 + len(expected.pieces)


async def test_max_tokens_ends_the_text_with_length(client: openai.AsyncOpenAI) -> None:
    completion = await client.completions.create(model=DEPLOYMENT, prompt="the sky", max_tokens=2)

    assert (completion.choices[0].text, completion.choices[0].finish_reason) == ("answer 0", "length")
    assert completion.usage is not None
    assert completion.usage.completion_tokens == 2


async def test_stop_sequence_ends_the_text_before_it(client: openai.AsyncOpenAI) -> None:
    completion = await client.completions.create(model=DEPLOYMENT, prompt="the sky", stop=[" to", "zzz"])

    assert (completion.choices[0].text, completion.choices[0].finish_reason) == ("answer 0", "stop")


async def test_streamed_completion_with_usage(client: openai.AsyncOpenAI, fake: FakeAPI) -> None:
    stream = await client.completions.create(
        model=DEPLOYMENT, prompt="the blue sky", stream=True, stream_options={"include_usage": True}
    )
    texts, finishes, chunks = await collect(stream)

    expected = fake.generate("the blue sky")
    assert texts == {0: expected.text}
    assert finishes == {0: "stop"}
    assert len(chunks) > len(expected.pieces)  # piece by piece, then the usage chunk
    assert {chunk.object for chunk in chunks} == {"text_completion"}
    assert len({chunk.id for chunk in chunks}) == 1
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens) == (3, len(expected.pieces))


async def test_stream_has_no_usage_unless_asked(client: openai.AsyncOpenAI) -> None:
    stream = await client.completions.create(model=DEPLOYMENT, prompt="the sky", stream=True)
    _, finishes, chunks = await collect(stream)

    assert finishes == {0: "stop"}
    assert all(chunk.usage is None and chunk.choices for chunk in chunks)


async def test_prompt_list(client: openai.AsyncOpenAI, fake: FakeAPI) -> None:
    completion = await client.completions.create(model=DEPLOYMENT, prompt=PROMPTS)

    expected = [fake.generate(prompt) for prompt in PROMPTS]
    assert sorted((c.index, c.text) for c in completion.choices) == [(i, g.text) for i, g in enumerate(expected)]
    assert completion.usage is not None
    assert completion.usage.prompt_tokens == 5  # summed over the prompts
    assert completion.usage.completion_tokens == sum(len(g.pieces) for g in expected)


async def test_prompt_list_with_n_indexes_choices_as_openai_does(client: openai.AsyncOpenAI, fake: FakeAPI) -> None:
    completion = await client.completions.create(model=DEPLOYMENT, prompt=PROMPTS, n=2)

    assert sorted(choice.index for choice in completion.choices) == [0, 1, 2, 3]
    assert by_prompt({c.index: c.text for c in completion.choices}, n=2) == expected_samples(fake, n=2)


async def test_prompt_list_with_n_streamed(client: openai.AsyncOpenAI, fake: FakeAPI) -> None:
    stream = await client.completions.create(model=DEPLOYMENT, prompt=PROMPTS, n=2, max_tokens=3, stream=True)
    texts, finishes, _ = await collect(stream)

    assert by_prompt(texts, n=2) == expected_samples(fake, n=2, max_tokens=3)
    assert finishes == dict.fromkeys(range(4), "length")


@pytest.mark.parametrize(
    ("upstream_status", "status", "error"),
    [(400, 400, openai.BadRequestError), (429, 429, openai.RateLimitError), (500, 502, openai.InternalServerError)],
)
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
async def test_upstream_error_maps_to_its_status(
    client: openai.AsyncOpenAI,
    case: ProviderCase,
    fake: FakeAPI,
    upstream_status: int,
    status: int,
    error: type[openai.APIStatusError],
    stream: bool,
) -> None:
    needs(case, "http_errors")
    fake.script(Fail(upstream_status, "upstream says no", retry_after="7"))

    with pytest.raises(error) as caught:
        await client.completions.create(model=DEPLOYMENT, prompt="x", stream=stream)

    assert caught.value.status_code == status
    assert "upstream says no" in caught.value.message
    if upstream_status < 500:
        assert caught.value.response.headers["retry-after"] == "7"
    else:
        assert f"'{DEPLOYMENT}'" in caught.value.message


async def test_upstream_timeout_is_a_504(start_gateway: StartGateway, case: ProviderCase, fake: FakeAPI) -> None:
    needs(case, "stall")
    fake.script(Stall(120.0))
    async with sdk_for(await start_gateway(timeout_s=0.5)) as client:
        # The 0.5 s timeout, not the upstream's 120 s: 10 s leaves a loaded machine room.
        async with asyncio.timeout(10):
            with pytest.raises(openai.APIStatusError) as caught:
                await client.completions.create(model=DEPLOYMENT, prompt="x")

    assert caught.value.status_code == 504


async def test_stream_that_stalls_ends_with_a_timeout_error(
    start_gateway: StartGateway, case: ProviderCase, fake: FakeAPI
) -> None:
    needs(case, "stall")
    fake.script(SlowStream(delay_s=120.0))  # after its first text, a stall the gateway cuts
    received: list[str] = []

    async def read(stream: AsyncStream[Completion]) -> None:
        async for chunk in stream:
            received.append(chunk.choices[0].text)

    # 2 s: the first text must come within it (the timeout bounds each read), room for a loaded machine.
    async with sdk_for(await start_gateway(timeout_s=2)) as client:
        stream = await client.completions.create(model=DEPLOYMENT, prompt="one two three", stream=True)
        with pytest.raises(openai.APIError, match="stalled"):
            await read(stream)

    assert received == ["answer"]  # what came before the stall reached the client


async def test_stream_cut_short_is_an_error_not_a_short_answer(
    client: openai.AsyncOpenAI, case: ProviderCase, fake: FakeAPI
) -> None:
    needs(case, "cut_stream")
    fake.script(CutStream())
    stream = await client.completions.create(model=DEPLOYMENT, prompt="one two three", stream=True)

    with pytest.raises(openai.APIError, match="truncated"):
        await collect(stream)


async def test_client_disconnect_closes_the_upstream_stream(
    client: openai.AsyncOpenAI, case: ProviderCase, fake: FakeAPI
) -> None:
    needs(case, "disconnect")
    fake.script(SlowStream(delay_s=0.1))
    prompt = " ".join(f"w{i}" for i in range(60))  # about six seconds of stream
    stream = await client.completions.create(model=DEPLOYMENT, prompt=prompt, stream=True)
    async for _ in stream:
        break
    await stream.close()  # the client goes away mid-stream

    await asyncio.wait_for(fake.closed_early.wait(), timeout=10)  # a stream left alone ends without it
    assert fake.streams_closed_early == 1


async def test_client_disconnect_closes_every_upstream_call_of_a_prompt_list(
    client: openai.AsyncOpenAI, case: ProviderCase, fake: FakeAPI
) -> None:
    needs(case, "disconnect")
    fake.script(SlowStream(delay_s=0.1), SlowStream(delay_s=0.1))  # as many as there are upstream calls
    prompts = [" ".join(f"{word}{i}" for i in range(60)) for word in ("w", "v")]
    stream = await client.completions.create(model=DEPLOYMENT, prompt=prompts, stream=True)
    async for _ in stream:
        break
    await stream.close()

    async with asyncio.timeout(10):  # streams left alone end without closings
        for _ in fake.received:
            await fake.closings.get()
    assert fake.streams_closed_early == len(fake.received)


async def test_client_giving_up_cancels_every_upstream_call(
    client: openai.AsyncOpenAI, case: ProviderCase, fake: FakeAPI
) -> None:
    needs(case, "stall")
    fake.script(Stall(120.0), Stall(120.0))

    with pytest.raises(openai.APITimeoutError):
        await client.completions.create(model=DEPLOYMENT, prompt=PROMPTS, timeout=0.5)

    async with asyncio.timeout(10):  # calls left alone would stall for 120 s
        for _ in fake.received:
            await fake.closings.get()


async def test_unsupported_parameter_is_a_400_naming_it(
    client: openai.AsyncOpenAI, case: ProviderCase, fake: FakeAPI
) -> None:
    if case.unsupported is None:
        pytest.skip(f"{case.type} honours every Completions parameter")
    name, value = case.unsupported

    with pytest.raises(openai.BadRequestError) as caught:
        await client.completions.create(model=DEPLOYMENT, prompt="x", extra_body={name: value})

    assert caught.value.param == name
    assert f"'{DEPLOYMENT}'" in caught.value.message
    assert fake.received == []  # refused before any upstream call


async def test_drop_params_lets_a_deployment_drop_what_it_cannot_honour(
    start_gateway: StartGateway, case: ProviderCase, fake: FakeAPI
) -> None:
    if case.unsupported is None:
        pytest.skip(f"{case.type} honours every Completions parameter")
    name, value = case.unsupported
    async with sdk_for(await start_gateway(drop_params=[name])) as client:
        completion = await client.completions.create(model=DEPLOYMENT, prompt="x", extra_body={name: value})

    assert completion.choices[0].text == fake.generate("x").text
    if case.upstream:
        assert name not in fake.received[0].body


async def test_token_id_prompts(client: openai.AsyncOpenAI, case: ProviderCase, fake: FakeAPI) -> None:
    request: dict[str, Any] = {"model": DEPLOYMENT, "prompt": [1, 2, 3]}
    if case.token_prompts:
        completion = await client.completions.create(**request)
        assert completion.choices[0].text == fake.generate("1 2 3").text
        return

    with pytest.raises(openai.BadRequestError) as caught:
        await client.completions.create(**request)
    assert caught.value.param == "prompt"
    assert fake.received == []


async def test_wrong_provider_key_is_refused_upstream_and_never_echoed(
    start_gateway: StartGateway, case: ProviderCase, fake: FakeAPI
) -> None:
    needs(case, "http_errors")
    wrong = "sk-wrong-provider-key-abcdefghijklmnop"
    async with sdk_for(await start_gateway(key=wrong)) as client:
        with pytest.raises(openai.APIStatusError) as caught:
            await client.completions.create(model=DEPLOYMENT, prompt="x")

    assert caught.value.status_code == fake.bad_key_status
    assert wrong not in caught.value.response.text
