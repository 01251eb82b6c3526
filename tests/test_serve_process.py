"""`gateway serve` as an operator runs it: a real process, real port, several workers, clean stop."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import openai
import yaml

from tests.conftest import deployment
from tests.fake_upstream import FakeUpstream

GATEWAY = Path(sys.executable).with_name("gateway")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def wait_until_listening(port: int, process: subprocess.Popen[bytes]) -> None:
    for _ in range(200):
        assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.05)
            continue
        writer.close()
        return
    raise AssertionError("the gateway did not open its port")


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
        async with openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0) as sdk:
            for _ in range(100):  # the workers reload within moments of the signal
                models = {model.id for model in (await sdk.models.list()).data}
                if models == {"new"}:
                    break
                await asyncio.sleep(0.05)
            # New connections land on either worker: every one of them must have reloaded.
            answers = await asyncio.gather(*(sdk.completions.create(model="new", prompt=str(i)) for i in range(20)))
    finally:
        process.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(process.wait, 10)

    assert models == {"new"}
    assert [answer.choices[0].text for answer in answers] == [f"echo: {i}" for i in range(20)]
    assert code == 0  # the signal reloaded the workers; it did not stop them
