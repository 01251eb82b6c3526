"""The commands and output of the operating pages, against `gateway serve` on loopback (the pages'
127.0.0.1:8080 becomes the test's port): docs/observability.md's traced request, docs/request-log.md's
queries, docs/troubleshooting.md's start-up line for a deployment whose credential is unset."""

from __future__ import annotations

import json
import re
import shutil
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml
from pytest_aiohttp import AiohttpServer

from tests.support.doc_blocks import ROOT, doc_block, newcomer_folder, on_port, run_shell, running
from tests.support.gateway_process import free_port, serve, serving
from tests.support.otlp_receiver import OtlpReceiver

ADMIN_KEY = "5e0c7a1f9b3d42e68a0c4f2b7d9e1a3c5b7d9f1e3a5c7b9d"
TEAM_A_KEY = "team-a-key-0123456789abcdef"
RECORDS_TIMEOUT_S = 30  # the request log writes a batch at least every second


def _shipped_config(tmp_path: Path) -> Path:
    """config.yaml, as compose mounts it, in a folder of the test's (its request log goes there)."""
    copy = tmp_path / "config.yaml"
    shutil.copy(ROOT / "config.yaml", copy)
    return copy


async def test_the_traced_request_answers_with_its_trace_id_and_reaches_the_exporter(
    tmp_path: Path, aiohttp_server: AiohttpServer
) -> None:
    receiver = OtlpReceiver()
    receiver.url = str((await aiohttp_server(receiver.app())).make_url("")).rstrip("/")
    block = doc_block("docs/observability.md", "curl -si http://127.0.0.1:8080/v1/completions").body
    command, _, shown = block.partition("\n# ")
    trace_id = re.search(r"traceparent: 00-(\w{32})-", command)
    assert trace_id is not None
    tracing = {  # what compose gives the gateway, the collector being the test's receiver
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
        "OTEL_SERVICE_NAME": "llm-gateway",
        "OTEL_BSP_SCHEDULE_DELAY": "20",  # export within milliseconds, not the SDK's 5 s
        "REDIS_URL": "",
    }

    async with serving(_shipped_config(tmp_path), tmp_path / "gateway.log", tracing) as gateway:
        printed = run_shell(on_port(command, gateway.port), tmp_path)
        spans = await receiver.wait_for(2)

    assert printed.returncode == 0, printed.stderr
    assert printed.stdout.strip() == shown.strip()  # `x-gateway-trace-id: 0af7…`, as the page shows
    traced = [span for span in spans if span.trace_id == trace_id.group(1)]
    assert {"POST /v1/completions", "text_completion mock"} <= {span.name for span in traced}
    assert {span.resource["service.name"] for span in traced} == {"llm-gateway"}


def _admin_get(root: str, path: str) -> Any:
    request = urllib.request.Request(f"{root}{path}", headers={"Authorization": f"Bearer {ADMIN_KEY}"})  # noqa: S310
    with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310 - loopback
        return json.loads(answer.read())


def _post(root: str, body: dict[str, Any]) -> int:
    request = urllib.request.Request(  # noqa: S310 - loopback
        f"{root}/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {TEAM_A_KEY}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310 - loopback
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return error.code


def _wait_for_records(root: str, count: int) -> None:
    deadline = time.monotonic() + RECORDS_TIMEOUT_S
    while len(_admin_get(root, "/admin/requests?key=team-a")["data"]) < count:
        assert time.monotonic() < deadline, f"fewer than {count} records after {RECORDS_TIMEOUT_S} s"
        time.sleep(0.1)


def test_the_request_log_queries_answer_as_the_page_says(tmp_path: Path) -> None:
    config = {
        "admin": {"key": "${GATEWAY_ADMIN_KEY}"},
        "keys": [{"name": "team-a", "key": "${TEAM_A_KEY}", "metadata": {"team": "search"}}],
        "deployments": [{"name": "mock", "provider": {"type": "mock"}}],
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    block = doc_block("docs/request-log.md", 'curl -s -H "Authorization: Bearer $GATEWAY_ADMIN_KEY"').body
    env = {"GATEWAY_ADMIN_KEY": ADMIN_KEY, "TEAM_A_KEY": TEAM_A_KEY, "REDIS_URL": ""}

    with serve(tmp_path / "config.yaml", tmp_path / "gateway.log", env) as gateway:
        refused = _post(gateway.root, {"model": "mock", "messages": "not a list"})
        served = _post(gateway.root, {"model": "mock", "messages": [{"role": "user", "content": "Hi"}]})
        _wait_for_records(gateway.root, 2)
        queried = run_shell(on_port(block, gateway.port), tmp_path, {"GATEWAY_ADMIN_KEY": ADMIN_KEY})

    assert (refused, served) == (400, 200)
    assert queried.returncode == 0, queried.stderr
    listed = json.loads(queried.stdout)  # the first command's page of records
    assert listed["object"] == "list"
    found = [(record["key"], record["status"], record["team"]) for record in listed["data"]]
    assert found == [("team-a", 400, "search")]  # the 4xx of team-a since then, not its 200
    spend = (tmp_path / "spend.csv").read_text().splitlines()  # the second command's file
    assert spend[0].split(",")[:2] == ["group", "requests"]
    assert [row.split(",")[:2] for row in spend[1:]] == [["search", "2"]]


def test_the_start_up_line_of_a_deployment_whose_credential_is_unset_is_the_page_s(tmp_path: Path) -> None:
    shown = doc_block("docs/troubleshooting.md", "deployment instruct    openai      unavailable").body.strip()
    folder = newcomer_folder(tmp_path)
    shutil.copy(ROOT / "config.yaml", folder / "config.yaml")

    # shell_env leaves OPENAI_API_KEY (and REDIS_URL) out, as in a fresh shell.
    with running(".venv/bin/gateway serve -c config.yaml", folder, free_port()) as gateway:
        lines = [line.strip() for line in gateway.log().splitlines()]

    assert any(line.endswith(f"  {shown}") for line in lines), "\n".join(lines)
