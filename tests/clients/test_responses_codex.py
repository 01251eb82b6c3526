"""The Codex CLI (`@openai/codex`, pinned in tests/clients/codex/) through the gateway's
`/v1/responses`: `codex exec` with a custom model provider pointed at the gateway (wire_api
responses, its own CODEX_HOME, no login, no retries), offline, against the mock and against a
loopback chat upstream scripted to call Codex's `exec_command` tool, whose output comes back as a
function_call_output and reaches the final answer. Skipped, saying why, where the CLI is not
installed (scripts/test.sh installs it best-effort into .clients/codex)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from tests.conftest import GatewayFactory, deployment
from tests.support.fake_upstream import FakeUpstream, chat_stream

CODEX = Path(__file__).resolve().parents[2] / ".clients" / "codex" / "node_modules" / ".bin" / "codex"
pytestmark = pytest.mark.skipif(
    not CODEX.exists(), reason="the Codex CLI is not installed (scripts/test.sh installs it into .clients/codex)"
)


async def codex_exec(gateway: TestServer, model: str, prompt: str, tmp_path: Path) -> tuple[int, str]:
    home, work = tmp_path / "codex-home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    provider = {
        "name": "gateway",
        "base_url": str(gateway.make_url("/v1")),
        "env_key": "GATEWAY_KEY",
        "wire_api": "responses",
        "request_max_retries": 0,
        "stream_max_retries": 0,
    }
    overrides = [f"model_providers.gw.{key}={json.dumps(value)}" for key, value in provider.items()]
    args = ["exec", "--skip-git-repo-check", "-C", str(work), "-c", "model_provider=gw", "-c", f"model={model}"]
    args += ["-c", "analytics.enabled=false", "-c", "check_for_update_on_startup=false"]  # nothing leaves the box
    for override in overrides:
        args += ["-c", override]
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "CODEX_HOME": str(home),  # no login, no config of the machine's user
        "GATEWAY_KEY": "unused",
        "NO_COLOR": "1",
    }
    process = await asyncio.create_subprocess_exec(
        str(CODEX),
        *args,
        prompt,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode is not None
    return process.returncode, out.decode() + err.decode()


async def test_codex_exec_answers_through_the_mock(make_gateway: GatewayFactory, tmp_path: Path) -> None:
    gateway = await make_gateway(
        {"deployments": [{"name": "m", "provider": {"type": "mock", "reply": "hello from the mock"}}]}
    )
    code, output = await codex_exec(gateway, "m", "Say hello", tmp_path)
    assert code == 0, output
    assert "hello from the mock" in output


def _calls_exec_command() -> Any:
    async def behaviour(request: web.Request, body: dict[str, Any]) -> web.StreamResponse:
        names = [tool["function"]["name"] for tool in body.get("tools", []) if tool["type"] == "function"]
        assert "exec_command" in names, names
        opening = {
            "index": 0,
            "id": "call_codex1",
            "type": "function",
            "function": {"name": "exec_command", "arguments": json.dumps({"cmd": "echo tool-ran-7e3b"})},
        }
        return await chat_stream([{"role": "assistant", "content": None, "tool_calls": [opening]}])(request, body)

    return behaviour


async def test_codex_exec_runs_a_tool_through_a_chat_deployment(
    make_gateway: GatewayFactory, upstream: FakeUpstream, tmp_path: Path
) -> None:
    gateway = await make_gateway({"deployments": [deployment("chat", upstream.base_url, retries=0)]})
    upstream.script(_calls_exec_command())
    code, output = await codex_exec(gateway, "chat", "Run echo for me", tmp_path)
    assert code == 0, output
    first, second = upstream.received[0].body, upstream.received[1].body
    assert first["stream"] is True
    [result] = [m for m in second["messages"] if m["role"] == "tool"]
    assert result["tool_call_id"] == "call_codex1"
    assert "tool-ran-7e3b" in result["content"]  # Codex ran the command and sent its output back
    assert output.count("tool-ran-7e3b") >= 1  # the fake's final answer echoes it
