"""`gateway serve` as an operator runs it: a real process, real port, several workers, clean stop."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import aiohttp
import openai
import pytest
import yaml

from tests.conftest import deployment
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway_process import START_TIMEOUT_S
from tests.support.redis_helpers import closed_port_url

GATEWAY = Path(sys.executable).with_name("gateway")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def wait_until_listening(port: int, process: subprocess.Popen[bytes]) -> None:
    """Until the gateway takes connections, or exits. The deadline only ends a hang: a loaded machine
    has taken over 20 s to import and start the app (200 tries of 0.05 s, about 10 s, was too short)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.05)
            continue
        writer.close()
        return
    raise AssertionError(f"the gateway did not open its port within {START_TIMEOUT_S} s")


def start_gateway(config_path: Path) -> subprocess.Popen[bytes]:
    """`gateway serve` on the config, as an operator runs it; the test stops it with SIGTERM."""
    return subprocess.Popen(  # noqa: S603 - our own console script
        [str(GATEWAY), "serve", "-c", str(config_path), "--log-level", "WARNING"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


async def test_two_workers_serve_the_sdk_and_stop_on_sigterm(upstream: FakeUpstream, tmp_path: Path) -> None:
    port = free_port()
    config = {"server": {"port": port, "workers": 2}, "deployments": [deployment("fake", upstream.base_url)]}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    process = start_gateway(path)
    try:
        await wait_until_listening(port, process)
        async with openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0) as sdk:
            answers = await asyncio.gather(*(sdk.completions.create(model="fake", prompt=str(i)) for i in range(20)))
            stream = await sdk.completions.create(model="fake", prompt="s", stream=True)
            streamed = "".join([chunk.choices[0].text async for chunk in stream if chunk.choices])
    finally:
        process.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(process.wait, 10)

    assert [answer.choices[0].text for answer in answers] == [f"echo: {i}" for i in range(20)]
    assert streamed == "echo: s "
    assert code == 0


ID_PREFIX = len("req_") + 16  # a worker's own: request ids are its prefix and a counter


async def until_each_worker_lists(port: int, workers: int, models: set[str]) -> set[str]:
    """Until each of the `workers` has listed `models` (a new connection per request: the kernel
    spreads them over the workers); the models last listed. Seen per worker, not timed: one that a
    loaded machine let reload later would have refused the requests that followed."""
    reloaded: set[str] = set()
    listed: set[str] = set()
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as http,
        asyncio.timeout(60),  # a bound for a hang, not a speed: the workers reload within moments
    ):
        while len(reloaded) < workers:
            async with http.get(f"http://127.0.0.1:{port}/v1/models") as answer:
                listed = {model["id"] for model in (await answer.json())["data"]}
                if listed == models:
                    reloaded.add(answer.headers["x-request-id"][:ID_PREFIX])
            await asyncio.sleep(0.02)
    return listed


async def test_sighup_to_the_parent_reloads_every_worker(upstream: FakeUpstream, tmp_path: Path) -> None:
    port = free_port()
    config = {
        "server": {"port": port, "workers": 2},
        "routing": {"reload": {"watch": False}},  # only the signal may reload here
        "deployments": [deployment("old", upstream.base_url)],
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    process = start_gateway(path)
    try:
        await wait_until_listening(port, process)
        config["deployments"] = [deployment("new", upstream.base_url)]
        path.write_text(yaml.safe_dump(config))
        process.send_signal(signal.SIGHUP)
        models = await until_each_worker_lists(port, workers=2, models={"new"})
        async with openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0) as sdk:
            # New connections land on either worker: every one of them must have reloaded.
            answers = await asyncio.gather(*(sdk.completions.create(model="new", prompt=str(i)) for i in range(20)))
    finally:
        process.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(process.wait, 10)

    assert models == {"new"}
    assert [answer.choices[0].text for answer in answers] == [f"echo: {i}" for i in range(20)]
    assert code == 0  # the signal reloaded the workers; it did not stop them


# --- everyday mistakes at start-up: one line naming the problem, or a gateway that serves anyway --


def serve_once(config_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`gateway serve` expected to stop on its own (a start-up mistake); the timeout catches one that serves."""
    return subprocess.run(  # noqa: S603 - our own console script
        [str(GATEWAY), "serve", "-c", str(config_path), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        timeout=60,
        check=False,
    )


def write_config(tmp_path: Path, config: Mapping[str, object]) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_port_in_use_is_one_line_naming_the_address(tmp_path: Path, workers: str) -> None:
    path = write_config(tmp_path, {"deployments": [deployment("fake", "http://127.0.0.1:9/v1")]})
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]

        result = serve_once(path, "--port", str(port), "--workers", workers)

    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    [line] = result.stderr.splitlines()
    assert line == (
        f"gateway: cannot listen on 127.0.0.1:{port}: address already in use "
        "(another gateway running? pick another --port)"
    )


async def test_a_second_gateway_on_the_port_of_a_running_one_is_refused(upstream: FakeUpstream, tmp_path: Path) -> None:
    # Workers bind with SO_REUSEPORT: without a check, a second gateway's workers would share the port.
    port = free_port()
    config = {"server": {"port": port, "workers": 2}, "deployments": [deployment("fake", upstream.base_url)]}
    path = write_config(tmp_path, config)
    first = start_gateway(path)
    try:
        await wait_until_listening(port, first)
        second = await asyncio.to_thread(serve_once, path)
    finally:
        first.send_signal(signal.SIGTERM)
        await asyncio.to_thread(first.wait, 10)

    assert second.returncode == 1
    assert "Traceback" not in second.stderr
    [line] = second.stderr.splitlines()
    assert f"cannot listen on 127.0.0.1:{port}: address already in use" in line


async def test_unset_metrics_and_admin_keys_start_the_gateway_with_metrics_closed(
    upstream: FakeUpstream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("METRICS_KEY", raising=False)
    monkeypatch.delenv("ADMIN_KEY", raising=False)
    port = free_port()
    config = {
        "server": {"port": port},
        "admin": {"key": "${ADMIN_KEY}"},
        "observability": {"metrics": {"key": "${METRICS_KEY}"}},
        "deployments": [deployment("fake", upstream.base_url)],
    }
    process = start_gateway(write_config(tmp_path, config))
    try:
        await wait_until_listening(port, process)
        async with aiohttp.ClientSession() as http:
            answers = {}
            for path in ("/metrics", "/dashboard/data", "/health"):
                async with http.get(f"http://127.0.0.1:{port}{path}", headers={"Authorization": "Bearer "}) as response:
                    answers[path] = (response.status, await response.json(content_type=None))
    finally:
        process.send_signal(signal.SIGTERM)
        await asyncio.to_thread(process.wait, 10)
    stderr = process.stderr.read().decode() if process.stderr else ""

    for path in ("/metrics", "/dashboard/data"):
        status, body = answers[path]
        assert status == 401
        assert set(body["error"]) == {"message", "type", "param", "code"}
        assert "observability.metrics.key" in body["error"]["message"]
        assert "not set" in body["error"]["message"]
    assert answers["/health"][0] == 200
    assert "Traceback" not in stderr
    [metrics_warning] = [line for line in stderr.splitlines() if "METRICS_KEY" in line]
    assert "WARNING" in metrics_warning
    [admin_warning] = [line for line in stderr.splitlines() if "ADMIN_KEY" in line]
    assert "WARNING" in admin_warning
    assert "admin API is off" in admin_warning


async def test_an_unreachable_redis_does_not_stop_the_gateway(upstream: FakeUpstream, tmp_path: Path) -> None:
    port = free_port()
    config = {
        "server": {"port": port},
        "redis": {"url": closed_port_url()},
        "deployments": [deployment("fake", upstream.base_url)],
    }
    process = start_gateway(write_config(tmp_path, config))
    try:
        await wait_until_listening(port, process)
        async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/health") as response:
            health = response.status
    finally:
        process.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(process.wait, 10)
    stderr = process.stderr.read().decode() if process.stderr else ""

    assert health == 200
    assert code == 0
    assert "Traceback" not in stderr


async def test_the_start_up_banner_says_where_it_listens_what_serves_and_where_spans_go(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    port = free_port()
    config = {
        "server": {"port": port},
        "deployments": [
            deployment("fake", upstream.base_url),
            {
                "name": "keyless",
                "provider": {"type": "openai", "base_url": upstream.base_url, "api_key": "${NO_SUCH_VAR}"},
            },
        ],
        "observability": {"tracing": {"enabled": True, "endpoint": "http://127.0.0.1:9/otlp"}},
    }
    process = subprocess.Popen(  # noqa: S603, ASYNC220 - our own console script, started at once
        [str(GATEWAY), "serve", "-c", str(write_config(tmp_path, config))],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={k: v for k, v in os.environ.items() if k != "NO_SUCH_VAR"} | {"PYTHONUNBUFFERED": "1"},
    )
    try:
        await wait_until_listening(port, process)
    finally:
        process.send_signal(signal.SIGTERM)
        await asyncio.to_thread(process.wait, 10)
    stderr = process.stderr.read().decode() if process.stderr else ""

    banner = [line.partition(" gateway: ")[2] for line in stderr.splitlines() if " INFO gateway: " in line]
    assert banner[0].startswith("llm-gateway ")
    assert f"http://127.0.0.1:{port}," in banner[0]
    [fake] = [line for line in banner if "deployment fake" in line]
    [keyless] = [line for line in banner if "deployment keyless" in line]
    assert fake.endswith("ready")
    assert "unavailable" in keyless
    assert "NO_SUCH_VAR" in keyless
    assert f"dashboard: http://127.0.0.1:{port}/dashboard" in stderr
    assert "tracing: on, spans to http://127.0.0.1:9/otlp/v1/traces" in stderr
    assert f"request log: SQLite, {tmp_path / 'requests.db'}" in stderr  # beside the config file
    assert "admin API and console: off" in stderr
