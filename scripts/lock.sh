#!/usr/bin/env bash
# Regenerate the hash-locked requirement files from pyproject.toml with pip-tools' pip-compile:
#   requirements-dev.lock    runtime + dev + local extras (torch aside): scripts/test.sh, CI
#   requirements.lock        runtime: scripts/serve.sh, the Docker image's runtime target
#   requirements-local.lock  runtime + local extra (torch aside): `bootstrap.sh local`, the local target
#   scripts/tools/*.lock     the check tools of .venv-tools (scripts/tools.sh)
# Every pin carries the sha256 of each file PyPI has for it; pip's --require-hashes refuses anything
# else. torch is pinned apart, without a hash (requirements-torch.txt says why).
#   scripts/lock.sh                  keep every pin that still satisfies pyproject.toml; add what is new
#   scripts/lock.sh --upgrade        newest versions everywhere      -P NAME: that package only
# Then run scripts/test.sh (bootstrap reinstalls from the new locks) and commit the lock files.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/tools.sh supply-chain
pins=""
compile() {  # output file, a line saying what it is for, then pip-compile's options
    local output="$1" purpose="$2"; shift 2
    CUSTOM_COMPILE_COMMAND="scripts/lock.sh" .venv-tools/supply-chain/bin/pip-compile --quiet --generate-hashes \
        --strip-extras --annotation-style line \
        --no-emit-index-url --no-emit-find-links --no-emit-trusted-host \
        --output-file "$output" "$@"
    # A stable file: the temporary pins file is named as what it came from, and a header says what
    # the file is for (pip-compile rewrites the file whole and keeps comments of its own only).
    local body
    body="$(sed "${pins:+s|-c $pins|-c requirements-dev.lock|g}" "$output")"
    printf '%s\n' "# $purpose" "$body" > "$output"
}
# torch's CPU build must be what the resolver sees (its dependencies differ from the CUDA build's):
# PyTorch's CPU index when it answers, else a wheel pip already finds (e.g. through find-links).
if .venv-tools/supply-chain/bin/python -c \
    'import urllib.request; urllib.request.urlopen("https://download.pytorch.org/whl/cpu/torch/", timeout=5)' \
    2>/dev/null; then
    export PIP_EXTRA_INDEX_URL="${PIP_EXTRA_INDEX_URL:-$(.venv-tools/supply-chain/bin/python -m pip config get global.extra-index-url 2>/dev/null || true)} https://download.pytorch.org/whl/cpu"
fi
# The project's build backend (setuptools) is locked too: the project is installed with
# --no-build-isolation, so nothing unlocked is fetched to build it. torch is left out (--unsafe-package).
project=(pyproject.toml --all-build-deps --unsafe-package torch -c requirements-torch.txt)
torch_note="torch is installed apart (requirements-torch.txt): pip-compile's closing WARNING about it is expected."
compile requirements-dev.lock \
    "Runtime, dev and local dependencies: bootstrap.sh dev (scripts/test.sh, CI). $torch_note" \
    "${project[@]}" --extra dev --extra local "$@"
# The smaller sets take the versions of the dev set, so every lock agrees on every shared package.
pins="$(mktemp)"
trap 'rm -f "$pins"' EXIT
grep -E '^[A-Za-z0-9]' requirements-dev.lock | sed -E 's/ *\\$//; s/ *;.*$//' > "$pins"
compile requirements.lock \
    "Runtime dependencies: bootstrap.sh without argument (scripts/serve.sh), the image's runtime target." \
    "${project[@]}" -c "$pins"
compile requirements-local.lock \
    "Runtime and local dependencies: bootstrap.sh local, the image's local target. $torch_note" \
    "${project[@]}" --extra local -c "$pins"
pins=""
for tools in scan supply-chain; do
    compile "scripts/tools/$tools.lock" "The tools of .venv-tools/$tools (scripts/tools.sh)." \
        --allow-unsafe "$@" "scripts/tools/$tools.in"
done
