"""`gateway serve --workers 2` on a real Redis: a response, plain or streamed, is stored before its
answer ends, so the client that reads it back at once, on a new connection that the kernel may give
to the other worker, finds it every time (read-your-writes across workers)."""

from __future__ import annotations

import asyncio
import shutil
import signal
import tempfile
from pathlib import Path
from typing import Any

import orjson
import yaml
from aiohttp import ClientSession, TCPConnector
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector

from tests.conftest import deployment
from tests.e2e.test_serve_process import free_port, start_gateway, wait_until_listening
from tests.support.fake_upstream import FakeUpstream

PAIRS = 40  # at least; then until each worker has made responses (a safety bound below)


def responses_per_worker(folder: Path) -> list[float]:
    """Responses made (POST /v1/responses answered 2xx), per worker (each worker's own metrics file)."""
    counts = []
    for file in sorted(folder.glob("counter_*.db")):
        with tempfile.TemporaryDirectory() as alone:
            shutil.copy(file, Path(alone) / file.name)
            registry = CollectorRegistry()
            MultiProcessCollector(registry, path=alone)  # type: ignore[no-untyped-call]
            samples = [sample for family in registry.collect() for sample in family.samples]
        counts.append(
            sum(
                sample.value
                for sample in samples
                if sample.name == "gateway_requests_total"
                and sample.labels.get("api") == "responses"
                and sample.labels.get("status_class") == "2xx"
            )
        )
    return counts


def text_of(response: dict[str, Any]) -> str:
    return "".join(part.get("text", "") for item in response.get("output", []) for part in item.get("content", []))


async def made(http: ClientSession, base: str, text: str, stream: bool) -> str:
    """The id of a new response to `text`, once its answer (the whole stream) has been read."""
    body = {"model": "fake", "input": text, "stream": stream}
    async with http.post(f"{base}/v1/responses", json=body) as response:
        assert response.status == 200
        raw = await response.read()
    if not stream:
        found: str = orjson.loads(raw)["id"]
        return found
    events = [orjson.loads(line[6:]) for line in raw.split(b"\n") if line.startswith(b"data: {")]
    assert events[-1]["type"] == "response.completed"
    found = events[-1]["response"]["id"]
    return found


async def test_a_response_is_read_back_at_once_from_either_worker(
    upstream: FakeUpstream, tmp_path: Path, redis_url: str, redis_prefix: str
) -> None:
    port, folder = free_port(), tmp_path / "metrics"
    config: dict[str, Any] = {
        "server": {"port": port, "workers": 2},
        "redis": {"url": redis_url, "prefix": redis_prefix, "timeout_s": 5.0},  # a loaded machine's write is no loss
        "deployments": [deployment("fake", upstream.base_url)],
        "observability": {"metrics": {"multiprocess_dir": str(folder)}, "access_log": {"enabled": False}},
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    process = start_gateway(path)
    base = f"http://127.0.0.1:{port}"
    read: list[tuple[int, str]] = []
    try:
        await wait_until_listening(port, process)
        # A new connection per request: the kernel spreads them over both workers.
        async with ClientSession(connector=TCPConnector(force_close=True)) as http:
            for n in range(400):
                per_worker = responses_per_worker(folder)
                if n >= PAIRS and len(per_worker) == 2 and min(per_worker) > 0:
                    break
                response_id = await made(http, base, f"turn {n}", stream=n % 2 == 1)
                async with http.get(f"{base}/v1/responses/{response_id}") as retrieved:
                    found = orjson.loads(await retrieved.read())
                read.append((retrieved.status, text_of(found).strip()))  # a stream's words end in spaces
    finally:
        process.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(process.wait, 10)

    assert len(per_worker) == 2
    assert min(per_worker) > 0, per_worker
    assert read == [(200, f"echo: turn {n}") for n in range(len(read))]
    assert code == 0
