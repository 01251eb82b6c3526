#!/usr/bin/env bash
# Create .venv (if missing) and install the gateway into it, every dependency from a hash-locked file.
# Idempotent (a stamp per set, redone when pyproject.toml or the lock is newer); re-run after pulling.
#   scripts/bootstrap.sh         runtime only                                  (requirements.lock)
#   scripts/bootstrap.sh local   plus the in-process engine (torch's CPU build, transformers)
#                                                  (requirements-local.lock, requirements-torch.txt)
#   scripts/bootstrap.sh dev     plus the engine and the test and lint tools   (requirements-dev.lock, …)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [[ ! -x .venv/bin/python ]]; then
    "$PYTHON" -m venv .venv
fi
case "${1:-}" in
    "")    extras="";            lock="requirements.lock" ;;
    local) extras="[local]";     lock="requirements-local.lock" ;;
    dev)   extras="[dev,local]"; lock="requirements-dev.lock" ;;  # the tests run the local engine too
    *)     echo "usage: scripts/bootstrap.sh [local|dev]" >&2; exit 2 ;;
esac
stamp=".venv/.installed${extras}"
if [[ ! -f "$stamp" || pyproject.toml -nt "$stamp" || "$lock" -nt "$stamp" || requirements-torch.txt -nt "$stamp" ]]; then
    pip=(.venv/bin/python -m pip --quiet --disable-pip-version-check)
    if [[ "$extras" == *local* ]]; then
        # torch is pinned apart, without a hash (requirements-torch.txt), its dependencies being in the
        # lock. Its default Linux wheel bundles CUDA (gigabytes); the CPU build is a fifth of that. Use
        # PyTorch's CPU index when it answers, beside the indexes pip is already configured with
        # (PIP_EXTRA_INDEX_URL is a space-separated list; a command-line option would replace them).
        if .venv/bin/python -c \
            'import urllib.request; urllib.request.urlopen("https://download.pytorch.org/whl/cpu/torch/", timeout=5)' \
            2>/dev/null; then
            configured="$(.venv/bin/python -m pip config get global.extra-index-url 2>/dev/null || true)"
            export PIP_EXTRA_INDEX_URL="${PIP_EXTRA_INDEX_URL:-$configured} https://download.pytorch.org/whl/cpu"
        fi
        # First: the lock's packages that need torch (sentence-transformers) find it installed, as
        # --require-hashes cannot resolve the unhashed pin.
        "${pip[@]}" install --no-deps -r requirements-torch.txt
    fi
    # Every dependency at the version and sha256 of the lock (scripts/lock.sh makes it from
    # pyproject.toml): a release that differs from the file that was locked is refused.
    "${pip[@]}" install --require-hashes -r "$lock"
    # The project itself adds nothing: no dependencies (the lock has them), and its build backend is
    # the lock's setuptools (no isolated build environment fetched unchecked). Its advice on editable
    # installs is not for us: silenced.
    PYTHONWARNINGS="ignore:Editable installation" "${pip[@]}" install --no-deps --no-build-isolation -e ".${extras}"
    # Fails when pyproject.toml needs what the lock lacks (tests/project/test_locked_install.py checks more).
    if ! problems="$(.venv/bin/python -m pip check --disable-pip-version-check)"; then
        echo "$problems (the lock disagrees with pyproject.toml: run scripts/lock.sh)" >&2; exit 1
    fi
    touch "$stamp"
    # What dev installs includes the runtime and the engine: serve.sh after test.sh installs nothing.
    if [[ "$extras" == "[dev,local]" ]]; then touch .venv/.installed ".venv/.installed[local]"; fi
fi
