"""Claude Code (`@anthropic-ai/claude-code`, pinned by tests/clients/claude-code/) in print mode
against the gateway, offline: `ANTHROPIC_BASE_URL` at the gateway, its key as
`ANTHROPIC_AUTH_TOKEN`, no telemetry, no auto-update, no nonessential traffic.

- On a chat deployment whose loopback OpenAI-compatible upstream is scripted to call Claude Code's
  `Read` tool: Claude Code streams the call (input_json_delta), runs the tool, sends its result
  back (tool_result -> a tool message), and prints the answer made from it: the round trip completes.
- On the mock: a plain prompt completes.

Skips when the CLI is not installed (scripts/test.sh installs it best-effort with npm)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from tests.conftest import GatewayFactory, deployment

CLAUDE = Path(__file__).resolve().parents[2] / ".clients" / "claude-code" / "node_modules" / ".bin" / "claude"
TEAM_KEY = "gw-claude-code-key-0123456789abcdef"
SECRET_WORD = "pineapple-4711"

pytestmark = pytest.mark.skipif(not CLAUDE.exists(), reason=f"Claude Code is not installed at {CLAUDE}")


def scripted_answer(body: dict[str, Any], target: Path) -> dict[str, Any]:
    """The 'model': read the file with Claude Code's Read tool, then say what the tool returned."""
    last = [message for message in body["messages"] if message["role"] != "system"][-1]
    names = [tool["function"]["name"] for tool in body.get("tools") or ()]
    if last["role"] == "tool":
        return {"content": f"The file says {SECRET_WORD if SECRET_WORD in str(last['content']) else 'nothing'}."}
    if "Read" in names:
        arguments = orjson.dumps({"file_path": str(target)}).decode()
        return {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_read",
                    "type": "function",
                    "function": {"name": "Read", "arguments": arguments},
                }
            ]
        }
    return {"content": "ok"}


def upstream_app(target: Path, seen: list[dict[str, Any]]) -> web.Application:
    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        seen.append(body)
        delta = scripted_answer(body, target)
        finish = "tool_calls" if "tool_calls" in delta else "stop"
        usage = {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}
        if not body.get("stream"):
            message = {
                "role": "assistant",
                "content": delta.get("content"),
                **({"tool_calls": delta["tool_calls"]} if "tool_calls" in delta else {}),
            }
            for call in message.get("tool_calls") or ():
                call.pop("index")
            choice = {"index": 0, "message": message, "finish_reason": finish}
            return web.json_response(
                {"id": "c1", "object": "chat.completion", "model": "up", "choices": [choice], "usage": usage}
            )
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        pieces = [delta]
        if "tool_calls" in delta:  # the arguments in two pieces, as upstreams stream them
            call = delta["tool_calls"][0]
            arguments = call["function"]["arguments"]
            head = {**call, "function": {"name": "Read", "arguments": arguments[:7]}}
            pieces = [{"tool_calls": [head]}, {"tool_calls": [{"index": 0, "function": {"arguments": arguments[7:]}}]}]
        for piece in [*pieces, {}]:
            chunk = {
                "id": "c1",
                "object": "chat.completion.chunk",
                "model": "up",
                "choices": [{"index": 0, "delta": piece, "finish_reason": None if piece else finish}],
            }
            await response.write(b"data: " + orjson.dumps(chunk) + b"\n\n")
        tail = {"id": "c1", "object": "chat.completion.chunk", "model": "up", "choices": [], "usage": usage}
        await response.write(b"data: " + orjson.dumps(tail) + b"\n\ndata: [DONE]\n\n")
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    return app


async def claude(gateway: TestServer, model: str, prompt: str, cwd: Path, small: str = "") -> tuple[int, str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(cwd / "home"),
        "ANTHROPIC_BASE_URL": str(gateway.make_url("")).rstrip("/"),
        "ANTHROPIC_AUTH_TOKEN": TEAM_KEY,
        "ANTHROPIC_MODEL": model,
        "ANTHROPIC_SMALL_FAST_MODEL": small or model,
        "ANTHROPIC_DEFAULT_HAIKU_MODEL": small or model,
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_BUG_COMMAND": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CODE_SKIP_BEDROCK_AUTH": "1",
    }
    (cwd / "home").mkdir(exist_ok=True)
    process = await asyncio.create_subprocess_exec(
        str(CLAUDE),
        "-p",
        prompt,
        "--max-turns",
        "4",
        cwd=str(cwd),
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout=120)
    except TimeoutError:
        process.kill()
        raise
    return process.returncode or 0, out.decode(), err.decode()


@pytest.fixture
async def gateway(
    make_gateway: GatewayFactory, aiohttp_server: Any, tmp_path: Path
) -> tuple[TestServer, list[dict[str, Any]]]:
    (tmp_path / "notes.txt").write_text(f"The word is {SECRET_WORD}.\n")
    seen: list[dict[str, Any]] = []
    upstream = await aiohttp_server(upstream_app(tmp_path / "notes.txt", seen))
    # Claude Code's model ids as aliases of the chat deployment (docs/apis/messages.md: Claude Code)
    scripted = deployment(
        "scripted", str(upstream.make_url("/v1")), retries=0, aliases=["claude-sonnet-4-5", "claude-haiku-4-5"]
    )
    mock = {"name": "mock", "provider": {"type": "mock"}}
    config = {"deployments": [scripted, mock], "keys": [{"name": "cc", "key": "${TEAM}"}]}
    return await make_gateway(config, {"TEAM": TEAM_KEY}), seen


async def test_claude_code_calls_a_tool_through_a_chat_deployment(
    gateway: tuple[TestServer, list[dict[str, Any]]], tmp_path: Path
) -> None:
    server, seen = gateway
    prompt = "Read notes.txt and tell me the word."
    code, out, err = await claude(server, "claude-sonnet-4-5", prompt, tmp_path, small="claude-haiku-4-5")
    assert code == 0, (out, err)
    assert SECRET_WORD in out, (out, err)
    assert any(m["role"] == "tool" and SECRET_WORD in str(m["content"]) for body in seen for m in body["messages"])


async def test_claude_code_completes_on_the_mock(
    gateway: tuple[TestServer, list[dict[str, Any]]], tmp_path: Path
) -> None:
    server, _ = gateway
    code, out, err = await claude(server, "mock", "Say hello.", tmp_path)
    assert code == 0, (out, err)
    assert out.strip(), err
