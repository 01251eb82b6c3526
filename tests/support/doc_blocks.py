"""The fenced blocks of the documentation (README.md and docs/**/*.md) for the tests that run them as
written. A test takes its block with `doc_block(page, start)`; tests/project/test_docs_blocks.py
finds those calls and fails on a block that no test takes, so a command, config or output shown to
a reader is one that some test runs or compares."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import ExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^```(\S*)([^\n]*)\n(.*?)^```", flags=re.MULTILINE | re.DOTALL)
INCLUDE = re.compile(r'^\s*--8<--\s+"([^"]+)"\s*$')
DOCUMENTED_PORT = 8080  # what the pages' commands and configs listen on (the shipped config's port)
RUN_TIMEOUT_S = 120  # a cold machine imports the gateway slowly
START_TIMEOUT_S = 120
# What differs from one run to the next in output: a duration (`5h59m44s`, `2.5s`, `20ms`) or a number.
VARYING = r"(?:\d+h)?(?:\d+m)?\d+(?:\.\d+)?m?s\b|\d+(?:\.\d+)?"


@dataclass(frozen=True)
class Block:
    page: str  # from the repository's root, e.g. docs/getting-started.md
    line: int  # the opening fence's line, 1-based
    language: str  # the fence's info word: text, yaml, python, ... ('' when none)
    body: str

    @property
    def start(self) -> str:
        """Its first non-blank line, stripped: what `doc_block` matches."""
        return next((line.strip() for line in self.body.splitlines() if line.strip()), "")

    @property
    def includes(self) -> list[str]:
        """The `--8<-- "FILE[:SECTION]"` targets when every line of the block is one, else []."""
        lines = [line for line in self.body.splitlines() if line.strip()]
        found = [match.group(1) for line in lines if (match := INCLUDE.match(line))]
        return found if lines and len(found) == len(lines) else []

    def where(self) -> str:
        return f"{self.page}:{self.line} ```{self.language}"


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks() -> list[Block]:
    """Every fenced block of every document, in order."""
    found = []
    for path in documents():
        text = path.read_text()
        for match in FENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append(Block(str(path.relative_to(ROOT)), line, match.group(1), match.group(3)))
    return found


def doc_block(page: str, start: str) -> Block:
    """The one block of `page` whose first line starts with `start` (it fails when the page changed)."""
    matching = [block for block in blocks() if block.page == page and block.start.startswith(start)]
    assert len(matching) == 1, f"{page}: {len(matching)} blocks start with {start!r} (the page changed?)"
    return matching[0]


def on_port(text: str, port: int) -> str:
    """A command of the pages, aimed at the test's own gateway instead of 127.0.0.1:8080."""
    for host in ("127.0.0.1", "localhost"):
        text = text.replace(f"{host}:{DOCUMENTED_PORT}", f"{host}:{port}")
    return text


def output_pattern(shown: str) -> re.Pattern[str]:
    """Output as a page shows it, as a pattern: the page wraps long lines (any whitespace matches
    any), and the counts and durations of one run (`45`, `5h59m44s`, `2.5s`) match any."""
    parts = []
    for token in re.split(rf"(\s+|{VARYING})", shown.strip()):
        if token.isspace():
            parts.append(r"\s+")
        elif re.fullmatch(VARYING, token):
            parts.append(f"(?:{VARYING})")
        else:
            parts.append(re.escape(token))
    return re.compile("".join(parts))


def newcomer_folder(tmp_path: Path) -> Path:
    """A folder where `.venv/bin/gateway` (as the pages write it) is this environment's command."""
    folder = tmp_path / "checkout"
    folder.mkdir()
    (folder / ".venv").symlink_to(Path(sys.prefix))
    return folder


def shell_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A reader's shell: the test's environment without the variables the pages' configs read."""
    unset = {"REDIS_URL", "OPENAI_API_KEY", "GATEWAY_CONFIG", "GATEWAY_PORT", "GATEWAY_KEY", "GATEWAY_ADMIN_KEY"}
    env = {name: value for name, value in os.environ.items() if name not in unset}
    return {**env, "PYTHONUNBUFFERED": "1", **(extra or {})}


def run_shell(script: str, cwd: Path, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """A block's commands in bash, stopping at the first that fails (as a reader would)."""
    return subprocess.run(  # noqa: S603 - the documentation's own commands
        ["/bin/bash", "-e", "-o", "pipefail", "-c", script],
        cwd=cwd,
        env=shell_env(env),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )


@dataclass(frozen=True)
class Running:
    port: int
    output: Path  # everything the block's commands wrote

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.output.read_text(errors="replace")


@contextmanager
def running(script: str, cwd: Path, port: int, env: Mapping[str, str] | None = None) -> Iterator[Running]:
    """A block that ends in `gateway serve`, run in bash in the background until /health answers on
    `port` (given to the gateway as $GATEWAY_PORT, which wins over its file), then stopped: SIGTERM
    to the shell and everything it started."""
    served = Running(port, cwd / "block-output.log")
    with served.output.open("wb") as sink:
        process = subprocess.Popen(  # noqa: S603 - the documentation's own commands
            ["/bin/bash", "-e", "-o", "pipefail", "-c", script],
            cwd=cwd,
            env=shell_env({**(env or {}), "GATEWAY_PORT": str(port)}),
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stopping it stops the gateway too
        )
    try:
        _wait_until_healthy(process, served)
        yield served
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@asynccontextmanager
async def running_async(
    script: str, cwd: Path, port: int, env: Mapping[str, str] | None = None
) -> AsyncIterator[Running]:
    """`running` for an async test: starting and stopping wait in a thread, so a loopback upstream
    the test's loop serves keeps answering meanwhile."""
    with ExitStack() as stack:
        served = await asyncio.to_thread(stack.enter_context, running(script, cwd, port, env))
        try:
            yield served
        finally:
            await asyncio.to_thread(stack.close)


def _wait_until_healthy(process: subprocess.Popen[bytes], served: Running) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"the block's commands ended ({process.returncode}):\n{served.log()}")
        try:
            with urllib.request.urlopen(f"{served.root}/health", timeout=5) as answer:  # noqa: S310 - loopback
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"no /health within {START_TIMEOUT_S} s:\n{served.log()}")
