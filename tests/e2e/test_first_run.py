"""What a new user meets first, taken from the README as written (tests/support/doc_blocks.py): the
quick start's commands answer (docs/getting-started.md includes the same blocks), the links of the
README and of every docs page lead somewhere inside the repository, and the compose stack serves on
its own."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
import yaml
from aiohttp.test_utils import TestServer

from gateway.app import create_app
from gateway.config.loader import load_config
from tests.e2e.test_serve_process import free_port
from tests.support.doc_blocks import doc_block

ROOT = Path(__file__).resolve().parents[2]
STARTUP_S = 120  # generous: a cold machine imports the app slowly; a gateway that listens ends the wait


COMMANDS = doc_block("README.md", "scripts/serve.sh --config config.yaml")


def without_credentials() -> dict[str, str]:
    """The environment of a fresh shell: none of the variables the shipped config refers to."""
    unset = {"OPENAI_API_KEY", "VLLM_BASE_URL", "VLLM_MODEL", "REDIS_URL", "ADMIN_KEY", "METRICS_KEY", "GATEWAY_CONFIG"}
    return {name: value for name, value in os.environ.items() if name not in unset}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[int]:
    """The README's serve command, as written, on a free port (its own --port wins over the file's)."""
    [serve] = [line for line in COMMANDS.body.splitlines() if "serve.sh" in line]
    command = serve.split("#")[0].split()
    port = free_port()
    log = (tmp_path / "gateway.log").open("wb")
    process = subprocess.Popen(  # noqa: S603 - the README's own command
        [*command, "--port", str(port)], cwd=ROOT, stdout=log, stderr=log, env=without_credentials()
    )
    try:
        _wait_for_health(port, process, tmp_path / "gateway.log")
        yield port
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
        log.close()


def _wait_for_health(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + STARTUP_S
    while time.monotonic() < deadline:
        assert process.poll() is None, log.read_text()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as answer:
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"the gateway did not answer /health within {STARTUP_S} s:\n{log.read_text()}")


def test_the_quick_start_snippets_answer_as_written(served: int) -> None:
    snippet = doc_block("README.md", "from openai import OpenAI").body
    curl = doc_block("README.md", "curl http://127.0.0.1:8080/v1/completions").body

    def on_port(text: str) -> str:
        return text.replace("127.0.0.1:8080", f"127.0.0.1:{served}")

    python = subprocess.run(  # noqa: S603 - the README's own snippet
        [sys.executable, "-c", on_port(snippet)], capture_output=True, text=True, timeout=60, check=False
    )
    shell = subprocess.run(  # noqa: S603 - the README's own command
        ["/bin/bash", "-c", on_port(curl)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert python.returncode == 0, python.stderr
    first, _, streamed = python.stdout.partition("\n")
    assert first.strip()  # the plain completion's text
    assert streamed.strip()  # the stream's text
    assert shell.returncode == 0, shell.stderr
    answer = json.loads(shell.stdout)
    assert answer["object"] == "text_completion"
    assert answer["usage"]["completion_tokens"] == 8


def test_the_readme_s_test_command_is_the_one_ci_runs() -> None:
    """Its second line cannot run inside the tests it starts: it is the script .ci/run runs, as is."""
    [test] = [line.split("#")[0].strip() for line in COMMANDS.body.splitlines() if "serve.sh" not in line]
    ci = (ROOT / ".ci" / "run").read_text()

    assert test == "scripts/test.sh"
    assert (ROOT / test).stat().st_mode & 0o111  # executable, as the README runs it
    assert re.search(r"^exec scripts/test\.sh$", ci, flags=re.MULTILINE)


async def test_the_shipped_config_says_why_the_other_deployments_cannot_serve_yet(aiohttp_server: Any) -> None:
    config = load_config(ROOT / "config.yaml", env=without_credentials())
    server: TestServer = await aiohttp_server(create_app(config))
    async with openai.AsyncOpenAI(base_url=str(server.make_url("/v1")), api_key="x", max_retries=0) as sdk:
        with pytest.raises(openai.APIStatusError) as unavailable:
            await sdk.completions.create(model="instruct", prompt="hi")

    assert unavailable.value.status_code == 503
    assert "OPENAI_API_KEY" in unavailable.value.message


def markdown_links(path: Path) -> Iterator[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.DOTALL)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if not re.match(r"https?://", target):
            yield target


def anchors(path: Path) -> set[str]:
    """GitHub's heading slugs: lower case, punctuation dropped, spaces as hyphens."""
    headings = re.findall(r"^#+ (.+)$", path.read_text(), flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings}


@pytest.mark.parametrize(
    "document",
    ["README.md", "BENCHMARKS.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md"))],
)
def test_every_link_of_the_docs_resolves_inside_the_repository(document: str) -> None:
    source = ROOT / document
    broken = []
    for target in markdown_links(source):
        file, _, anchor = target.partition("#")
        destination = (source.parent / file).resolve() if file else source
        inside = destination.is_relative_to(ROOT)
        if not inside or not destination.exists() or (anchor and anchor not in anchors(destination)):
            broken.append(target)

    assert broken == []


def test_the_compose_stack_serves_the_mock_deployment_out_of_the_box() -> None:
    """Offline (no docker daemon here): the gateway service's image, command and environment, and the
    config it mounts, give a gateway with a deployment that needs no credential."""
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    service = compose["services"]["gateway"]
    dockerfile = (ROOT / "Dockerfile").read_text()
    stages = re.findall(r"^FROM \S+ AS (\S+)$", dockerfile, flags=re.MULTILINE)
    default_target = re.fullmatch(r"\$\{GATEWAY_IMAGE_TARGET:-(\w+)\}", service["build"]["target"])
    # `${GATEWAY_CONFIG_FILE:-./config.yaml}:/etc/gateway/config.yaml:ro`: the source as compose reads it unset.
    sources = (re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", volume) for volume in service["volumes"])
    mounted = {target: source for source, target, *_ in (volume.split(":") for volume in sources)}

    assert default_target is not None
    assert default_target.group(1) == stages[-1]  # `docker build .` and compose build the same image
    assert "local" in stages
    local_stage = dockerfile.split("AS local")[1].split("FROM")[0]  # the engine: the local extra's lock, then torch
    assert re.search(r"pip install .*--require-hashes -r requirements-local\.lock", local_stage)
    assert re.search(r"pip install .*--no-deps .*-r requirements-torch\.txt", local_stage)
    assert mounted["/etc/gateway/config.yaml"] == "./config.yaml"
    environment = {
        name: re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", str(value)) for name, value in service["environment"].items()
    }
    config = load_config(ROOT / "config.yaml", env={**environment, "REDIS_URL": ""})
    mock = [d for d in config.config.deployments if d.provider.type == "mock"]
    assert mock
    assert config.deployments[mock[0].name].unavailable is None
