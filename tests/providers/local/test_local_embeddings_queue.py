"""The local encoder's shared queue, attacked through the gateway with its worker held at a gate (a
threading event the model's forward pass waits on), so every assertion is about order and counts,
never about speed: a flood beyond `max_queue` is a 429 with `Retry-After` while what fits is served;
many callers' inputs are batched together (fewer forward passes than requests), sorted by length
across the batches, and each caller gets the vector it gets alone."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, cast

import orjson
import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer

from gateway.http.app_keys import SERVING
from tests.conftest import GatewayFactory
from tests.support.encoder_model import encoder_dir
from tests.support.local_engine_helpers import SAFETY_S, until

pytest.importorskip("transformers", reason="the local engine needs the 'local' extra")

from providers.local.encoder.model import LoadedEncoder
from providers.local.encoder.provider import LocalEncoderProvider

Json = dict[str, Any]


class Gate:
    """Holds every forward pass until released, recording each batch's input lengths in order."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.batches: list[list[int]] = []
        self.release = threading.Event()
        real = LoadedEncoder.embed

        def embed(model: LoadedEncoder, batch: list[list[int]]) -> list[list[float]]:
            self.batches.append([len(ids) for ids in batch])
            assert self.release.wait(SAFETY_S), "the test never released the gate"
            return real(model, batch)

        monkeypatch.setattr(LoadedEncoder, "embed", embed)


def encoder(gateway: TestServer, name: str) -> LocalEncoderProvider:
    assert gateway.app is not None
    return cast(LocalEncoderProvider, gateway.app[SERVING].current.pipeline.deployments[name].provider)


def waiting(gateway: TestServer, name: str) -> int:
    return len(encoder(gateway, name)._waiting)  # the inputs queued for the next batch


async def post(http: ClientSession, gateway: TestServer, model: str, texts: list[str]) -> tuple[int, Json, Any]:
    async with http.post(
        gateway.make_url("/v1/embeddings"), json={"model": model, "input": texts, "encoding_format": "float"}
    ) as response:
        return response.status, orjson.loads(await response.read()), response.headers


@pytest.fixture
async def gateway(make_gateway: GatewayFactory) -> TestServer:
    def local(name: str, **options: Any) -> Json:
        provider = {"type": "local", "model": str(encoder_dir()), "device": "cpu", **options}
        return {"name": name, "provider": provider, "timeout_s": SAFETY_S}

    return await make_gateway(
        {"deployments": [local("bounded", max_queue=4, retry_after_s=3), local("batched", max_batch=5)]}
    )


async def alone(http: ClientSession, gateway: TestServer, model: str, text: str) -> list[float]:
    status, answer, _ = await post(http, gateway, model, [text])
    assert status == 200
    vector: list[float] = answer["data"][0]["embedding"]
    return vector


async def test_a_flood_past_max_queue_is_a_429_with_retry_after_and_what_fits_is_served(
    gateway: TestServer, http: ClientSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = {text: await alone(http, gateway, "bounded", text) for text in ("held", "a b c", "d e", "f")}
    gate = Gate(monkeypatch)
    held = asyncio.create_task(post(http, gateway, "bounded", ["held"]))
    await until(lambda: len(gate.batches) == 1)  # the worker is inside the forward pass; nothing waits

    fits = asyncio.create_task(post(http, gateway, "bounded", ["a b c", "d e", "f"]))  # 3 of the 4 places
    await until(lambda: waiting(gateway, "bounded") == 3)
    flood = await asyncio.gather(*(post(http, gateway, "bounded", ["x", "y"]) for _ in range(8)))  # 3 + 2 > 4
    last = asyncio.create_task(post(http, gateway, "bounded", ["f"]))  # 3 + 1 fits
    await until(lambda: waiting(gateway, "bounded") == 4)

    for status, error, headers in flood:
        assert (status, error["error"]["code"]) == (429, "engine_overloaded")
        assert headers["Retry-After"] == "3"
        assert "at most 4 inputs may wait" in error["error"]["message"]
    gate.release.set()
    answers = [await held, await fits, await last]
    assert [status for status, _, _ in answers] == [200, 200, 200]
    assert answers[1][1]["data"][0]["embedding"] == pytest.approx(expected["a b c"], abs=1e-5)
    assert answers[2][1]["data"][0]["embedding"] == pytest.approx(expected["f"], abs=1e-5)
    held_pass, then = gate.batches  # the held one, then everything that waited: one pass, sorted by length
    assert (len(held_pass), len(then)) == (1, 4)
    assert then == sorted(then)


async def test_many_callers_are_batched_together_sorted_by_length_each_getting_its_own_vector(
    gateway: TestServer, http: ClientSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = [" ".join(["word"] * (1 + (7 * i) % 11)) + f" {i}" for i in range(12)]
    expected = [await alone(http, gateway, "batched", text) for text in texts]
    gate = Gate(monkeypatch)
    held = asyncio.create_task(post(http, gateway, "batched", ["held"]))
    await until(lambda: len(gate.batches) == 1)

    callers = [asyncio.create_task(post(http, gateway, "batched", [text])) for text in texts]
    await until(lambda: waiting(gateway, "batched") == len(texts))
    gate.release.set()
    answers = [await caller for caller in callers]
    await held

    passes = gate.batches[1:]
    assert len(passes) == 3 < len(texts)  # 12 requests, three forward passes of at most max_batch (5)
    assert [len(batch) for batch in passes] == [5, 5, 2]
    lengths = [length for batch in passes for length in batch]
    assert lengths == sorted(lengths)  # sorted by length across the batches: short ones never pad to long ones
    for (status, answer, _), vector in zip(answers, expected, strict=True):
        assert status == 200
        assert answer["data"][0]["embedding"] == pytest.approx(vector, abs=1e-5)
