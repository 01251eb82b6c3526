#!/usr/bin/env bash
# A CycloneDX SBOM (JSON, cyclonedx-py) of a locked environment: every Python package it holds, with
# version and PyPI purl.
#   scripts/sbom.sh [runtime|local|dev]    -> build/sbom/llm-gateway-SET.cdx.json (its path is printed)
# runtime (default): what requirements.lock installs (the runtime image's packages); local: what
# requirements-local.lock and requirements-torch.txt install (the local image's). Each is installed
# as the Dockerfile does it (the project editable) into build/sbom/venv-SET, reused while the lock
# is unchanged.
# dev: .venv itself (scripts/bootstrap.sh dev). build/ is not committed.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
set="${1:-runtime}"
case "$set" in
    runtime) lock=requirements.lock ;;
    local)   lock=requirements-local.lock ;;
    dev)     lock="" ;;
    *)       echo "usage: scripts/sbom.sh [runtime|local|dev]" >&2; exit 2 ;;
esac
scripts/tools.sh supply-chain
mkdir -p build/sbom
if [[ -z "$lock" ]]; then
    scripts/bootstrap.sh dev
    python=.venv/bin/python
else
    venv="build/sbom/venv-$set"
    python="$venv/bin/python"
    stamp="$venv/.installed"
    if [[ ! -f "$stamp" || "$lock" -nt "$stamp" || pyproject.toml -nt "$stamp" || requirements-torch.txt -nt "$stamp" ]]; then
        rm -rf "$venv"
        "$PYTHON" -m venv "$venv"
        pip=("$python" -m pip --quiet --disable-pip-version-check)
        "${pip[@]}" install --require-hashes -r "$lock"
        if [[ "$set" == local ]]; then "${pip[@]}" install --no-deps -r requirements-torch.txt; fi
        # Editable, so that the venv runs the code as it is now (the SBOM lists the dependencies).
        PYTHONWARNINGS="ignore:Editable installation" "${pip[@]}" install --no-deps --no-build-isolation -e .
        touch "$stamp"
    fi
fi
out="build/sbom/llm-gateway-$set.cdx.json"
.venv-tools/supply-chain/bin/cyclonedx-py environment --pyproject pyproject.toml --output-reproducible --sv 1.6 \
    --of JSON -o "$out" "$python"
echo "$out"
