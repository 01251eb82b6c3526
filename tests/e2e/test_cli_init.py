"""`gateway init`: a starter config that `check-config` accepts and that serves as written."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from pathlib import Path

import aiohttp
import pytest
import yaml

from gateway.config.starter import PROVIDERS
from tests.e2e.test_serve_process import free_port, wait_until_listening
from tests.gateway.config.test_cli import GATEWAY, run_gateway

CLIENT_KEY = "gw-init-test-client-key-0123456789"
ADMIN_KEY = "init-test-admin-key-0123456789abcdef0123456789"


@pytest.mark.parametrize("provider", list(PROVIDERS))
def test_each_provider_gets_a_config_that_check_config_accepts(tmp_path: Path, provider: str) -> None:
    path = tmp_path / "config.yaml"

    written = run_gateway("init", str(path), "--provider", provider)
    checked = run_gateway("check-config", str(path))

    assert written.returncode == 0, written.stderr
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.startswith(f"{path}: OK")
    config = yaml.safe_load(path.read_text())
    [deployment] = config["deployments"]
    assert deployment["name"] == provider
    secrets = [deployment["provider"].get("api_key"), config["admin"]["key"], config["keys"][0]["key"]]
    assert all(secret is None or secret.startswith("${") for secret in secrets)  # environment references only


def test_flags_choose_the_upstream_and_bad_ones_are_named(tmp_path: Path) -> None:
    path = tmp_path / "vllm.yaml"
    argv = ["init", str(path), "--provider", "vllm", "--name", "qwen", "--base-url", "http://10.0.0.5:8000/v1"]

    written = run_gateway(*argv, "--model", "Qwen/Qwen3-8B", "--no-keys")
    refused = run_gateway("init", str(tmp_path / "other.yaml"), "--provider", "vllm", "--api-key-env", "not a name")

    assert written.returncode == 0, written.stderr
    config = yaml.safe_load(path.read_text())
    assert config["deployments"] == [
        {
            "name": "qwen",
            "provider": {"type": "openai", "base_url": "http://10.0.0.5:8000/v1", "model": "Qwen/Qwen3-8B"},
        }
    ]
    assert "keys" not in config
    assert refused.returncode != 0
    assert "--api-key-env" in refused.stderr
    assert not (tmp_path / "other.yaml").exists()


def test_an_existing_file_is_kept_without_force(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("# mine\n")

    kept = run_gateway("init", str(path))
    replaced = run_gateway("init", str(path), "--force")

    assert kept.returncode == 1
    assert "--force" in kept.stderr
    assert replaced.returncode == 0
    assert "deployments" in path.read_text()


async def test_the_default_starter_serves_a_chat_with_its_key(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    port = free_port()
    written = await asyncio.to_thread(run_gateway, "init", str(path), "--port", str(port))
    assert written.returncode == 0, written.stderr
    env = {**os.environ, "GATEWAY_KEY": CLIENT_KEY, "GATEWAY_ADMIN_KEY": ADMIN_KEY, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(  # noqa: S603, ASYNC220 - our own console script, started at once
        [str(GATEWAY), "serve", "-c", str(path), "--log-level", "WARNING"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        await wait_until_listening(port, process)
        body = {"model": "mock", "messages": [{"role": "user", "content": "hello"}]}
        url = f"http://127.0.0.1:{port}/v1/chat/completions"
        async with aiohttp.ClientSession() as http:
            async with http.post(url, json=body) as anonymous:
                refused = anonymous.status
            async with http.post(url, json=body, headers={"Authorization": f"Bearer {CLIENT_KEY}"}) as response:
                status, answer = response.status, await response.json()
    finally:
        process.send_signal(signal.SIGTERM)
        await asyncio.to_thread(process.wait, 10)

    assert refused == 401
    assert status == 200
    assert answer["choices"][0]["message"]["content"]
