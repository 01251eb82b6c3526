"""The check tools of .venv-tools/ (scripts/tools.sh) for the tests that run them: installed at most once
per session from their hash-locked files. A test skips only when they are missing and PyPI does not
answer (no network); any other install failure fails it."""

from __future__ import annotations

import functools
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run(command: list[str | Path], *, timeout: float = 300, **options: Any) -> subprocess.CompletedProcess[str]:
    """One of the project's scripts or locked tools, with arguments the test chose; its output captured,
    its exit status left to the caller."""
    arguments = [str(part) for part in command]
    return subprocess.run(arguments, capture_output=True, text=True, timeout=timeout, check=False, **options)  # noqa: S603


@functools.cache
def _install(name: str) -> tuple[int, str]:
    result = run([ROOT / "scripts" / "tools.sh", name], timeout=900)
    return result.returncode, result.stdout + result.stderr


def _pypi_answers() -> bool:
    try:
        with urllib.request.urlopen("https://pypi.org/simple/pip/", timeout=10):
            return True
    except OSError:
        return False


def tool_bin(name: str) -> Path:
    """The bin folder of .venv-tools/NAME (`scan` or `supply-chain`), installed first if needed."""
    code, output = _install(name)
    if code != 0:
        # pip's complaints about this machine's optional local indexes are noise: keep the rest.
        shown = "\n".join(line for line in output.splitlines() if "is ignored: it is neither" not in line)
        if not _pypi_answers():
            pytest.skip(f"scripts/tools.sh {name} could not install the tools and PyPI does not answer: {shown[-500:]}")
        pytest.fail(f"scripts/tools.sh {name} failed (exit status {code}):\n{shown[-4000:]}")
    return ROOT / ".venv-tools" / name / "bin"
