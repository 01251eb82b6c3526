#!/usr/bin/env bash
# Create .venv (if missing) and install the gateway into it. Idempotent; re-run after pulling.
#   scripts/bootstrap.sh         runtime only
#   scripts/bootstrap.sh local   plus the in-process engine (torch's CPU build, transformers)
#   scripts/bootstrap.sh dev     plus the engine and the test and lint tools
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [[ ! -x .venv/bin/python ]]; then
    "$PYTHON" -m venv .venv
fi
case "${1:-}" in
    "")    extras="" ;;
    local) extras="[local]" ;;
    dev)   extras="[dev,local]" ;;  # the tests run the local engine too
    *)     echo "usage: scripts/bootstrap.sh [local|dev]" >&2; exit 2 ;;
esac
stamp=".venv/.installed${extras}"
if [[ ! -f "$stamp" || pyproject.toml -nt "$stamp" || requirements.lock -nt "$stamp" ]]; then
    .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
    # torch's default Linux wheel bundles CUDA (gigabytes); its CPU build is a fifth of that. Use
    # PyTorch's CPU index when it answers, beside the indexes pip is already configured with
    # (PIP_EXTRA_INDEX_URL is a space-separated list; a command-line option would replace them).
    if [[ "$extras" == *local* ]] && .venv/bin/python -c \
        'import urllib.request; urllib.request.urlopen("https://download.pytorch.org/whl/cpu/torch/", timeout=5)' \
        2>/dev/null; then
        configured="$(.venv/bin/python -m pip config get global.extra-index-url 2>/dev/null || true)"
        export PIP_EXTRA_INDEX_URL="${PIP_EXTRA_INDEX_URL:-$configured} https://download.pytorch.org/whl/cpu"
    fi
    # requirements.lock: the exact versions CI tested (torch's CPU build among them), not the newest.
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -c requirements.lock -e ".${extras}"
    touch "$stamp"
    # What dev installs includes the runtime and the engine: serve.sh after test.sh installs nothing.
    if [[ "$extras" == "[dev,local]" ]]; then touch .venv/.installed ".venv/.installed[local]"; fi
fi
