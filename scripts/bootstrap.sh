#!/usr/bin/env bash
# Create .venv (if missing) and install the gateway into it. Idempotent; re-run after pulling.
#   scripts/bootstrap.sh         runtime only
#   scripts/bootstrap.sh dev     plus the test and lint tools
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [[ ! -x .venv/bin/python ]]; then
    "$PYTHON" -m venv .venv
fi
extras=""
[[ "${1:-}" == "dev" ]] && extras="[dev]"
stamp=".venv/.installed${extras}"
if [[ ! -f "$stamp" || pyproject.toml -nt "$stamp" ]]; then
    .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".${extras}"
    touch "$stamp"
fi
