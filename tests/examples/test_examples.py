"""Every client example under `examples/` runs as a newcomer runs it, against `gateway serve` on the
mock: each Python file as its own process (the `openai`, `anthropic` and Portkey SDKs, LangChain,
LlamaIndex) and each curl script with bash, pointed at the gateway only by GATEWAY_URL and
GATEWAY_API_KEY, its output checked for what the example promises to show. The gateway requires
that key, so an example that did not send it fails. Every file under `examples/` is run by some
test and included into docs/examples.md."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import examples_catalog as catalog
from tests.support.gateway_process import ServedGateway, serve

KEY = "gw-examples-key-0123456789abcdef"
RUN_TIMEOUT_S = 300  # importing an SDK takes seconds on a loaded machine; LangChain more

# What each Python example's output must show (every pattern must match, multiline).
PYTHON_OUTPUT: dict[str, list[str]] = {
    "openai/completions.py": [r"\A.*\w.*\n", r"^tokens: [1-9]\d* in, [1-9]\d* out$"],
    "openai/chat.py": [r"\A.*\w.*\n", r"^finish_reason: stop, total tokens: [1-9]\d*$"],
    "openai/streaming.py": [r"\A( \w+){2,}\n", r"^completion tokens: [1-9]\d*$"],
    "openai/tools.py": [r'^tool call: get_weather\(\{"city": ?"\w+"\}\)$', r"^answer: .*\w"],
    "openai/responses.py": [r"\Aresp_\w+: .*\w.*\nresp_\w+: .*\w"],
    "openai/embeddings.py": [r"^input 0: 256 dimensions", r"^input 1: 256 dimensions", r"^tokens: [1-9]\d*$"],
    "anthropic/messages.py": [r"\A.*\w.*\n", r"^stop_reason: end_turn, tokens: [1-9]\d* in, [1-9]\d* out$"],
    "anthropic/streaming.py": [r"\A( \w+){2,}\n", r"^stop_reason: end_turn, output tokens: [1-9]\d*$"],
    "langchain/chat.py": [r"\A.*\w.*\n.*\w.*\n\Z"],  # the plain answer, then the streamed one
    "llamaindex/embeddings.py": [r"^query: 256 dimensions; documents: 2 vectors of 256$"],
    "portkey/chat.py": [r"\A.*\w"],
}


def _sse_text(output: str) -> None:
    events = [line.removeprefix("data: ") for line in output.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(event) for event in events[:-1]]
    assert {chunk["object"] for chunk in chunks} == {"chat.completion.chunk"}
    assert "".join(chunk["choices"][0]["delta"].get("content") or "" for chunk in chunks if chunk["choices"]).strip()


def _chat(answer: dict[str, Any]) -> None:
    assert answer["object"] == "chat.completion"
    assert answer["choices"][0]["message"]["content"].strip()


def _response(answer: dict[str, Any]) -> None:
    assert answer["object"] == "response"
    assert answer["status"] == "completed"
    assert answer["output"][0]["content"][0]["text"].strip()


def _message(answer: dict[str, Any]) -> None:
    assert answer["type"] == "message"
    assert answer["stop_reason"] == "end_turn"
    assert answer["content"][0]["text"].strip()


def _embeddings(answer: dict[str, Any]) -> None:
    assert [len(item["embedding"]) for item in answer["data"]] == [8, 8]  # the script asks for 8 dimensions


def _json(check: Callable[[dict[str, Any]], None]) -> Callable[[str], None]:
    return lambda output: check(json.loads(output))


# What each curl script's output must be.
CURL_OUTPUT: dict[str, Callable[[str], None]] = {
    "chat.sh": _json(_chat),
    "stream.sh": _sse_text,
    "responses.sh": _json(_response),
    "messages.sh": _json(_message),
    "embeddings.sh": _json(_embeddings),
}


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedGateway]:
    """`gateway serve` on the mock, with one API key (from the environment, as configs take them)."""
    folder = tmp_path_factory.mktemp("examples-gateway")
    config = {
        "keys": [{"name": "examples", "key": "${GATEWAY_API_KEY}"}],
        "deployments": [{"name": "mock", "provider": {"type": "mock"}}],
    }
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    with serve(folder / "config.yaml", folder / "gateway.log", {"GATEWAY_API_KEY": KEY}) as served:
        yield served


def run(command: list[str], gateway: ServedGateway, key: str = KEY) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GATEWAY_URL": gateway.url, "GATEWAY_API_KEY": key, "PYTHONUNBUFFERED": "1"}
    return subprocess.run(  # noqa: S603 - the repository's own examples
        command, capture_output=True, text=True, env=env, timeout=RUN_TIMEOUT_S, check=False, cwd=catalog.ROOT
    )


def name(path: Path) -> str:
    return str(path.relative_to(catalog.EXAMPLES))


@pytest.mark.parametrize("example", catalog.PYTHON, ids=name)
def test_the_python_example_runs_and_shows_its_answer(example: Path, gateway: ServedGateway) -> None:
    patterns = PYTHON_OUTPUT.get(name(example))
    assert patterns, f"add what the output of {name(example)} must show to PYTHON_OUTPUT"

    result = run([sys.executable, str(example)], gateway)

    assert result.returncode == 0, result.stderr[-3000:]
    for pattern in patterns:
        assert re.search(pattern, result.stdout, re.MULTILINE), f"{pattern!r} not in:\n{result.stdout}"


@pytest.mark.parametrize("script", catalog.CURL, ids=name)
def test_the_curl_example_runs_and_shows_its_answer(script: Path, gateway: ServedGateway) -> None:
    check = CURL_OUTPUT.get(script.name)
    assert check, f"add what the output of {name(script)} must be to CURL_OUTPUT"

    result = run(["bash", str(script)], gateway)

    assert result.returncode == 0, result.stdout + result.stderr
    check(result.stdout)


def test_a_curl_example_with_a_wrong_key_fails_showing_the_gateway_s_reason(gateway: ServedGateway) -> None:
    result = run(["bash", str(catalog.EXAMPLES / "curl" / "chat.sh")], gateway, key="not-a-key")

    assert result.returncode == 22  # curl --fail-with-body: an HTTP error is a failed command
    assert json.loads(result.stdout)["error"]["code"] == "invalid_api_key"


def test_every_example_falls_back_to_the_shipped_config_s_address_and_an_open_gateway_s_key() -> None:
    shipped = yaml.safe_load((catalog.ROOT / "config.yaml").read_text())["server"]
    assert f"http://{shipped['host']}:{shipped['port']}/v1" == catalog.DEFAULT_URL

    for example in [*catalog.PYTHON, *catalog.CURL]:
        text = example.read_text()
        urls = re.findall(r"GATEWAY_URL[\"']?(?:, |:-)\"?([^\"})]+)", text)
        keys = re.findall(r"GATEWAY_API_KEY[\"']?(?:, |:-)\"?([^\"})]+)", text)
        assert urls == [catalog.DEFAULT_URL], name(example)
        assert keys == [catalog.DEFAULT_KEY], name(example)


def test_every_file_under_examples_is_run_by_a_test() -> None:
    untested = sorted(name(path) for path in catalog.every_file() - catalog.exercised())

    assert untested == [], "run them in a test and name them in tests/support/examples_catalog.py"


def test_every_file_under_examples_is_included_into_the_examples_page_and_is_all_its_code() -> None:
    page = (catalog.ROOT / "docs" / "examples.md").read_text()
    included = set(re.findall(r'^--8<-- "([^"]+)"$', page, re.MULTILINE))
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```$", page, re.MULTILINE | re.DOTALL)

    assert [block for block in blocks if not re.fullmatch(r'--8<-- "[^"]+"\n', block)] == []  # code only by inclusion

    missing = {str(path.relative_to(catalog.ROOT)) for path in catalog.every_file()} - included

    assert sorted(missing) == [], "include them into docs/examples.md"
