"""Which test runs which file of `examples/`: a file none of these names fails
tests/examples/test_examples.py, so a new example cannot go untested."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

# What every client example falls back to without GATEWAY_URL / GATEWAY_API_KEY: the shipped
# config.yaml's address, and a key an open gateway (no keys configured) accepts.
DEFAULT_URL = "http://127.0.0.1:8080/v1"
DEFAULT_KEY = "no-keys-configured"

# tests/examples/test_examples.py: run with python, each output checked.
PYTHON = sorted(EXAMPLES.rglob("*.py"))
# tests/examples/test_examples.py: run with bash, each output checked.
CURL = sorted((EXAMPLES / "curl").glob("*.sh"))
# tests/examples/test_examples_configs.py: `gateway check-config`, and served.
CONFIGS = sorted((EXAMPLES / "configs").glob("*.yaml"))

# tests/examples/test_examples_agents.py: Claude Code's and Codex's settings, with the CLIs when installed.
CLAUDE_CODE_SETTINGS = EXAMPLES / "claude-code" / "settings.json"
CLAUDE_CODE_GATEWAY = EXAMPLES / "claude-code" / "gateway.yaml"
CODEX_CONFIG = EXAMPLES / "codex" / "config.toml"


def exercised() -> set[Path]:
    return {*PYTHON, *CURL, *CONFIGS, CLAUDE_CODE_SETTINGS, CLAUDE_CODE_GATEWAY, CODEX_CONFIG}


def every_file() -> set[Path]:
    return {path for path in EXAMPLES.rglob("*") if path.is_file() and "__pycache__" not in path.parts}
