"""`gateway serve --workers 2`: whichever worker answers a scrape reports the traffic of both."""

from __future__ import annotations

import asyncio
import shutil
import signal
from pathlib import Path

import yaml
from aiohttp import ClientSession, TCPConnector
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.mmap_dict import MmapedDict, mmap_key
from prometheus_client.multiprocess import MultiProcessCollector

from gateway.observability.metrics import _WorkersFiles
from tests.conftest import deployment
from tests.e2e.test_serve_process import free_port, start_gateway, wait_until_listening
from tests.support.fake_upstream import FakeUpstream
from tests.support.observability_helpers import scrape, value

BATCH = 40  # requests sent at once, on new connections, until both workers have served some
MAX_BATCHES = 10


def served_by_each_worker(folder: Path) -> list[float]:
    """Completion requests per worker, each worker's own file read on its own."""
    counts = []
    for file in sorted(folder.glob("counter_*.db")):
        alone = folder / f"alone-{file.stem}"
        alone.mkdir(exist_ok=True)
        shutil.copy(file, alone / file.name)
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=str(alone))  # type: ignore[no-untyped-call]
        samples = [sample for family in registry.collect() for sample in family.samples]
        counts.append(sum(sample.value for sample in samples if sample.name == "gateway_requests_total"))
    return counts


def started_workers(folder: Path) -> set[str]:
    """The pids of the workers whose series' files exist (each makes `counter_<pid>.db` … as its app starts)."""
    return {file.stem.rsplit("_", 1)[-1] for file in folder.glob("*.db")}


async def both_workers_started(folder: Path) -> None:
    deadline = asyncio.get_running_loop().time() + 30
    while len(await asyncio.to_thread(started_workers, folder)) < 2:
        assert asyncio.get_running_loop().time() < deadline, "the second worker never started"
        await asyncio.sleep(0.1)


async def test_a_scrape_sums_the_series_of_both_workers(upstream: FakeUpstream, tmp_path: Path) -> None:
    port, folder = free_port(), tmp_path / "metrics"
    config = {
        "server": {"port": port, "workers": 2},
        "deployments": [deployment("fake", upstream.base_url)],
        "observability": {"metrics": {"multiprocess_dir": str(folder)}, "access_log": {"enabled": False}},
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    process = start_gateway(path)
    try:
        await wait_until_listening(port, process)
        await both_workers_started(folder)  # the first to listen is not the last to start
        url = f"http://127.0.0.1:{port}"
        statuses: list[int] = []
        # A new connection per request: the kernel spreads them over both workers, though on a
        # loaded machine one worker may accept a whole burst; then another burst follows.
        async with ClientSession(connector=TCPConnector(force_close=True)) as http:
            for _ in range(MAX_BATCHES):
                first = len(statuses)
                bodies = [
                    {"model": "fake", "prompt": str(i), "stream": i % 2 == 0} for i in range(first, first + BATCH)
                ]
                statuses += await asyncio.gather(*(_post(http, f"{url}/v1/completions", body) for body in bodies))
                # Each worker adds its per-request counts to the shared files once a second (the
                # scraped one at once): within a few seconds every scrape must show every request.
                deadline = asyncio.get_running_loop().time() + 30  # a bound for a hang, not a speed
                while value(await scrape(http, f"{url}/metrics"), "gateway_requests_total", deployment="fake") < len(
                    statuses
                ):
                    assert asyncio.get_running_loop().time() < deadline, "the workers' counts never reached the files"
                    await asyncio.sleep(0.2)
                per_worker = await asyncio.to_thread(served_by_each_worker, folder)
                if len(per_worker) == 2 and all(count > 0 for count in per_worker):
                    break
            scrapes = [await scrape(http, f"{url}/metrics") for _ in range(6)]
    finally:
        process.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(process.wait, 10)

    sent = len(statuses)
    assert statuses == [200] * sent
    assert len(per_worker) == 2
    assert all(count > 0 for count in per_worker), per_worker  # both workers served some
    assert sum(per_worker) == sent
    for scraped in scrapes:  # whichever worker answered, it reported both workers' traffic
        assert value(scraped, "gateway_requests_total", deployment="fake") == sent
        assert value(scraped, "gateway_request_duration_seconds_count", deployment="fake") == sent
        assert value(scraped, "gateway_time_to_first_token_seconds_count", deployment="fake") == sent / 2
        assert value(scraped, "gateway_in_flight_requests") == 0
        assert value(scraped, "gateway_circuit_state", deployment="fake") == 0
    assert code == 0


async def _post(http: ClientSession, url: str, body: dict[str, object]) -> int:
    async with http.post(url, json=body) as response:
        await response.read()
        return response.status


def test_a_file_a_worker_has_not_sized_yet_is_left_out_of_a_scrape_not_failing_it(tmp_path: Path) -> None:
    """A worker creates its file empty and sizes it a moment later: a scrape (or the dashboard's
    sampler) in between still reads every other worker's series (prometheus-client's own merge
    fails on the empty file)."""
    first = MmapedDict(str(tmp_path / "counter_101.db"))  # type: ignore[no-untyped-call]
    key = mmap_key("gateway_requests", "gateway_requests_total", ["api"], ["completions"], "Requests.")
    first.write_value(key, 3.0, 0.0)  # type: ignore[no-untyped-call]
    first.close()  # type: ignore[no-untyped-call]
    (tmp_path / "counter_102.db").touch()  # the second worker's, created, not sized yet

    registry = CollectorRegistry()
    registry.register(_WorkersFiles(str(tmp_path)))
    assert 'gateway_requests_total{api="completions"} 3.0' in generate_latest(registry).decode()
