#!/usr/bin/env bash
# Create the check tools' virtual environments under .venv-tools/ (if missing), each at the versions
# and hashes of its lock in scripts/tools/:
#   scan          checkov, kubernetes-validate, kubectl (kustomize), hadolint: tests/project/test_deploy_manifests.py
#   supply-chain  pip-compile (scripts/lock.sh), cyclonedx-py (scripts/sbom.sh)
# Apart from .venv, and from each other: checkov's many dependencies would fight the gateway's pins
# and the SBOM tool's. Idempotent: installs only when a lock is newer than its stamp.
#   scripts/tools.sh [scan|supply-chain]...     (default: both)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
names=("$@")
[[ ${#names[@]} -gt 0 ]] || names=(scan supply-chain)
for name in "${names[@]}"; do
    lock="scripts/tools/$name.lock"
    [[ -f "$lock" ]] || { echo "scripts/tools.sh: no $lock" >&2; exit 2; }
    venv=".venv-tools/$name"
    if [[ ! -x "$venv/bin/python" ]]; then
        "$PYTHON" -m venv "$venv"
    fi
    stamp="$venv/.installed"
    if [[ ! -f "$stamp" || "$lock" -nt "$stamp" ]]; then
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --require-hashes -r "$lock"
        touch "$stamp"
    fi
done
