"""`gateway serve --workers 2`, real processes: a refresh header from an authenticated caller
reloads every worker, not only the one that got it; an unauthenticated one reloads none."""

from __future__ import annotations

import asyncio
import shutil
import signal
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import ClientSession, TCPConnector
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector

from tests.conftest import deployment
from tests.e2e.test_serve_process import free_port, start_gateway, wait_until_listening
from tests.support.fake_upstream import FakeUpstream

KEY = "reload-workers-key-0123456789"
AUTH = {"Authorization": f"Bearer {KEY}"}
REFRESH = {"x-gateway-refresh-config": "true"}


def served_new_per_worker(folder: Path) -> list[float]:
    """Successful requests for the deployment `new`, per worker (each worker's own metrics file)."""
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
                and sample.labels.get("deployment") == "new"
                and sample.labels.get("status_class") == "2xx"
            )
        )
    return counts


async def post(http: ClientSession, url: str, model: str, headers: dict[str, str]) -> int:
    async with http.post(url, json={"model": model, "prompt": "hi"}, headers=headers) as response:
        await response.read()
        return response.status


async def test_an_authenticated_refresh_reaches_every_worker(
    upstream: FakeUpstream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RELOAD_WORKERS_KEY", KEY)
    port, folder = free_port(), tmp_path / "metrics"
    config: dict[str, Any] = {
        "server": {"port": port, "workers": 2},
        "routing": {"reload": {"watch": False, "header_min_interval_s": 0}},  # only the header may reload
        "keys": [{"name": "ops", "key": "${RELOAD_WORKERS_KEY}"}],
        "deployments": [deployment("old", upstream.base_url)],
        "observability": {"metrics": {"multiprocess_dir": str(folder)}, "access_log": {"enabled": False}},
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    process = start_gateway(path)
    url = f"http://127.0.0.1:{port}/v1/completions"
    try:
        await wait_until_listening(port, process)
        config["deployments"].append(deployment("new", upstream.base_url))
        path.write_text(yaml.safe_dump(config))
        # A new connection per request: the kernel spreads them over both workers.
        async with ClientSession(connector=TCPConnector(force_close=True)) as http:
            refused = [await post(http, url, "new", REFRESH) for _ in range(10)]  # no key: no reload
            before = [await post(http, url, "new", AUTH) for _ in range(10)]
            assert await post(http, url, "new", {**REFRESH, **AUTH}) == 200  # reloaded where it landed
            deadline = asyncio.get_running_loop().time() + 20  # a safety bound: it takes moments
            while asyncio.get_running_loop().time() < deadline:  # until each worker has served `new`
                per_worker = served_new_per_worker(folder)
                if len(per_worker) == 2 and min(per_worker) > 0:
                    break
                await post(http, url, "new", AUTH)
            after = [await post(http, url, "new", AUTH) for _ in range(20)]
    finally:
        process.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(process.wait, 10)

    assert refused == [401] * 10
    assert before == [404] * 10  # the file changed on disk, but nothing reloaded it
    assert len(per_worker) == 2
    assert min(per_worker) > 0, per_worker
    assert after == [200] * 20
    assert code == 0
