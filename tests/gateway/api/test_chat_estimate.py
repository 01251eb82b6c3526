"""The chat estimate for `tpm` limits and budgets counts every text sent upstream (unknown fields at
any level, file parts, tool schemas) and counts images, audio and files at the documented figures:
5,000 tokens of text in an unknown field or a `file` part are refused under a 1,000-token limit or
budget, through a real gateway on loopback (Redis for the budget)."""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer

from gateway.api.parsing import validate_chat
from gateway.api.schemas import CompletionRequest
from policies.limits.estimate import (
    AUDIO_BYTES_PER_TOKEN,
    CHARS_PER_TOKEN,
    FILE_ID_TOKENS,
    IMAGE_TOKENS,
    IMAGE_TOKENS_LOW,
    TOKENS_PER_MESSAGE,
    estimate,
)
from tests.conftest import GatewayFactory, deployment
from tests.support.fake_upstream import FakeUpstream

Json = dict[str, Any]
TEAM_KEY = "team-key-0123456789abcdef"
TEXT = "word " * 4000  # 20,000 characters: 5,000 tokens at 4 characters a token


def chat(*parts: Json, **fields: Any) -> Json:
    content: Any = list(parts) if parts else "Summarise."
    return {"model": "fake", "messages": [{"role": "user", "content": content}], "max_completion_tokens": 10, **fields}


def data_url(media_type: str, raw: bytes) -> str:
    return f"data:{media_type};base64,{base64.b64encode(raw).decode()}"


def image(detail: str) -> Json:
    return {"type": "image_url", "image_url": {"url": data_url("image/png", b"\x89PNG" * 8), "detail": detail}}


# Each: a body whose prompt is about 5,000 tokens, in a place the old estimate did not count.
LARGE = {
    "unknown field": chat(documents=[{"title": "report", "text": TEXT}]),
    "unknown field in a message": {
        "model": "fake",
        "messages": [{"role": "user", "content": "Summarise.", "x_context": TEXT}],
        "max_completion_tokens": 10,
    },
    "file part": chat({"type": "file", "file": {"file_data": data_url("text/plain", TEXT.encode()), "filename": "r"}}),
    "three images": chat(image("high"), image("auto"), image("high")),
}


async def post(http: ClientSession, gateway: TestServer, body: Json, key: str | None = None) -> tuple[int, Json]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with http.post(gateway.make_url("/v1/chat/completions"), json=body, headers=headers) as response:
        return response.status, orjson.loads(await response.read())


@pytest.mark.parametrize("where", sorted(LARGE))
async def test_a_prompt_the_old_estimate_missed_is_refused_under_a_1000_token_tpm(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession, where: str
) -> None:
    fake = deployment("fake", upstream.base_url, retries=0, limits={"tpm": 1000})
    gateway = await make_gateway({"deployments": [fake]})

    small, answer = await post(http, gateway, chat(image("low")))
    assert small == 200, answer
    status, answer = await post(http, gateway, LARGE[where])
    assert (status, answer["error"]["code"]) == (429, "request_too_large")
    assert len(upstream.received) == 1


@pytest.mark.parametrize("where", ["unknown field", "file part"])
async def test_a_prompt_the_old_estimate_missed_is_refused_under_a_1000_token_budget(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    http: ClientSession,
    redis_settings: dict[str, str],
    where: str,
) -> None:
    config = {
        "redis": redis_settings,
        "keys": [{"name": "team", "key": "${TEAM_KEY}", "budget": {"tokens": 1000, "period": "1d"}}],
        "deployments": [deployment("fake", upstream.base_url, retries=0)],
    }
    gateway = await make_gateway(config, {"TEAM_KEY": TEAM_KEY})

    status, answer = await post(http, gateway, LARGE[where], TEAM_KEY)
    assert (status, answer["error"]["code"]) == (429, "budget_exceeded")
    assert upstream.received == []
    status, answer = await post(http, gateway, chat(), TEAM_KEY)
    assert status == 200, answer


def prompt_tokens(body: Json) -> int:
    return estimate(validate_chat(body), body).prompt_tokens


def test_media_count_at_the_documented_figures() -> None:
    base = prompt_tokens(chat({"type": "text", "text": "Describe."}))
    mp3 = b"\xff" * (AUDIO_BYTES_PER_TOKEN["mp3"] * 30)
    wav = b"R" * (AUDIO_BYTES_PER_TOKEN["wav"] * 30)
    pdf = b"%PDF" * 1000
    cases = {
        "high image": (image("high"), IMAGE_TOKENS),
        "low image": (image("low"), IMAGE_TOKENS_LOW),
        "image by address": ({"type": "image_url", "image_url": {"url": "https://e.x/a.png"}}, IMAGE_TOKENS),
        "mp3": ({"type": "input_audio", "input_audio": {"data": base64.b64encode(mp3).decode(), "format": "mp3"}}, 30),
        "wav": ({"type": "input_audio", "input_audio": {"data": base64.b64encode(wav).decode(), "format": "wav"}}, 30),
        "file data": ({"type": "file", "file": {"file_data": data_url("application/pdf", pdf)}}, 1000),
        "file id": ({"type": "file", "file": {"file_id": "file-1"}}, FILE_ID_TOKENS),
    }
    for name, (part, tokens) in cases.items():
        counted = prompt_tokens(chat({"type": "text", "text": "Describe."}, part)) - base
        assert tokens <= counted <= tokens + 10, (name, counted)


def test_every_text_sent_upstream_counts_and_what_is_not_read_does_not() -> None:
    base = prompt_tokens(chat())
    read: dict[str, Any] = {
        "tools": [{"type": "function", "function": {"name": "f", "description": TEXT}}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": {"description": TEXT}}},
        "prediction": {"type": "content", "content": TEXT},
        "x_deep": [{"a": {"b": [TEXT]}}],
        "user": TEXT,  # not prompt, but sent upstream: every text sent upstream counts
        "stop": [TEXT],
        "metadata": {f"k{i}": TEXT[:500] for i in range(16)},  # within the reference's bounds (16 x 512)
    }
    for name, value in read.items():
        assert prompt_tokens(chat(**{name: value})) - base >= min(len(TEXT), 16 * 500) // CHARS_PER_TOKEN, name
    unread: dict[str, Any] = {"temperature": 0.5, "seed": 4, "logit_bias": {"50256": -100}, "service_tier": "auto"}
    for name, value in unread.items():
        assert prompt_tokens(chat(**{name: value})) == base, name
    two = {"model": "fake", "messages": [{"role": "user", "content": "a"}] * 2}
    assert prompt_tokens(two) == 2 * TOKENS_PER_MESSAGE + 1


def test_a_completions_unknown_field_counts_like_its_prompt() -> None:
    plain = CompletionRequest.model_validate({"model": "fake", "prompt": "Summarise.", "max_tokens": 10})
    with_documents = CompletionRequest.model_validate(
        {"model": "fake", "prompt": "Summarise.", "max_tokens": 10, "documents": [{"text": TEXT}]}
    )
    assert estimate(with_documents).prompt_tokens - estimate(plain).prompt_tokens >= len(TEXT) // CHARS_PER_TOKEN
