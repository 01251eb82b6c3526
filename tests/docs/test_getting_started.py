"""docs/getting-started.md's steps 4 and 5 as a newcomer takes them, in a folder of their own where
`.venv/bin/gateway` is this environment's command: `gateway init`, the starter with a budget added,
the key's variables exported and the file served, calls until the budget refuses as the page shows;
then a vLLM starter, checked and served against a loopback OpenAI-compatible server. (Steps 1 to 3
are the README's quick start and examples/openai/tools.py, run by tests/e2e and tests/examples.)"""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import aiohttp
import openai
import pytest
import yaml
from aiohttp.test_utils import TestServer
from pytest_aiohttp import AiohttpServer

from tests.support.doc_blocks import doc_block, newcomer_folder, output_pattern, run_shell, running, running_async
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway_process import free_port

PAGE = "docs/getting-started.md"
# The one thing a test adds to the page's shell: what `openssl rand` prints also goes to a file, so
# the test knows the keys the page's commands made.
KEEP_OPENSSL = 'openssl() {{ command openssl "$@" | tee -a {path}; }}\n'
MAX_CALLS = 100  # the budget (300 tokens) runs out long before


def _starter_then_budget(folder: Path) -> None:
    """Step 4's first block, then the page's edit of what it wrote."""
    init = run_shell(doc_block(PAGE, ".venv/bin/gateway init my.yaml --provider mock").body, folder)
    assert init.returncode == 0, init.stderr
    checked = run_shell(".venv/bin/gateway check-config my.yaml", folder)  # "accepts as written"
    assert checked.returncode == 0, checked.stdout + checked.stderr
    starter = yaml.safe_load((folder / "my.yaml").read_text())
    budgeted = doc_block(PAGE, "server: {host: 127.0.0.1, port: 8080}").body
    edited = yaml.safe_load(budgeted)
    added = {field: edited["keys"][0].pop(field) for field in ("budget", "limits")}

    assert edited == starter  # the page's file is the starter with the key's budget and limits added
    assert starter["keys"][0]["key"] == "${GATEWAY_KEY}"
    assert starter["admin"]["key"] == "${GATEWAY_ADMIN_KEY}"
    assert added["budget"] == {"tokens": 300, "period": "day"}
    (folder / "my.yaml").write_text(budgeted)


def _call(client: openai.OpenAI) -> None:
    client.chat.completions.create(
        model="mock", messages=[{"role": "user", "content": "What is the weather in Paris?"}], max_tokens=16
    )


def _until_refused(client: openai.OpenAI) -> openai.RateLimitError:
    for _ in range(MAX_CALLS):
        try:
            _call(client)
        except openai.RateLimitError as refused:
            return refused
    raise AssertionError(f"{MAX_CALLS} calls and the budget never refused")


def test_step_4_serves_the_key_until_its_budget_refuses_as_the_page_shows(tmp_path: Path) -> None:
    folder = newcomer_folder(tmp_path)
    _starter_then_budget(folder)
    secrets = folder / "openssl.out"
    serve = doc_block(PAGE, "export GATEWAY_KEY=$(openssl rand -hex 16)").body

    with running(KEEP_OPENSSL.format(path=secrets) + serve, folder, free_port()) as gateway:
        key, admin_key = secrets.read_text().split()
        client = openai.OpenAI(base_url=f"{gateway.root}/v1", api_key=key, max_retries=0)
        with pytest.raises(openai.AuthenticationError):  # "a missing or wrong one is a 401"
            _call(openai.OpenAI(base_url=f"{gateway.root}/v1", api_key="not-the-key", max_retries=0))
        refused = _until_refused(client)
        usage = urllib.request.Request(  # noqa: S310 - loopback
            f"{gateway.root}/admin/keys/first-app/usage", headers={"Authorization": f"Bearer {admin_key}"}
        )
        with urllib.request.urlopen(usage, timeout=10) as answer:  # noqa: S310 - loopback
            used = json.loads(answer.read())

    shown = doc_block(PAGE, "Budget exceeded for key 'first-app'").body
    error = refused.body
    assert isinstance(error, dict)
    assert error["code"] == "budget_exceeded"
    assert output_pattern(shown).fullmatch(error["message"]), f"the page shows:\n{shown}\nthe gateway says:\n{error}"
    assert int(refused.response.headers["retry-after"]) >= 1  # counts down to the renewal
    assert used["key"] == "first-app"
    assert 0 < used["tokens"] <= 300
    assert used["budget"]["tokens"] == 300


async def test_step_5_serves_a_vllm_starter_on_the_reader_s_server(
    tmp_path: Path, aiohttp_server: AiohttpServer
) -> None:
    upstream = FakeUpstream()
    server: TestServer = await aiohttp_server(upstream.app())
    block = doc_block(PAGE, ".venv/bin/gateway init mine.yaml --provider vllm").body
    assert "http://127.0.0.1:8000/v1" in block
    model = re.search(r"--model (\S+)", block)
    assert model is not None
    address = f"127.0.0.1:{server.port}"
    script = block.replace("127.0.0.1:8000", address)  # the reader's vLLM: ours, on a free port
    folder = newcomer_folder(tmp_path)
    key, admin_key = "k" * 32, "a1b2c3d4" * 8
    exported = {"GATEWAY_KEY": key, "GATEWAY_ADMIN_KEY": admin_key}  # step 4's, in the same shell

    async with (
        running_async(script, folder, free_port(), exported) as gateway,
        aiohttp.ClientSession(headers={"Authorization": f"Bearer {key}"}) as http,
    ):
        body = {"model": "vllm", "messages": [{"role": "user", "content": "Hello"}], "max_tokens": 8}
        async with http.post(f"{gateway.root}/v1/chat/completions", json=body) as answer:
            served = (answer.status, await answer.json())
        await server.close()  # "If the upstream cannot be reached, the call is a 502 naming ... the address"
        async with http.post(f"{gateway.root}/v1/chat/completions", json=body) as answer:
            unreachable = (answer.status, await answer.json())

    assert "mine.yaml: OK" in gateway.log()  # check-config, before serve
    assert served[0] == 200, served
    assert served[1]["choices"][0]["message"]["content"]
    [received] = upstream.received
    assert received.path == "/v1/chat/completions"
    assert received.body["model"] == model.group(1)  # the deployment sends the model the command named
    assert unreachable[0] == 502, unreachable
    assert "vllm" in unreachable[1]["error"]["message"]
    assert address in unreachable[1]["error"]["message"]
