#!/usr/bin/env bash
# Set up a fresh machine and run every check: lint, format, types, tests (real Redis, real HTTP).
#   scripts/test.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh dev
mapfile -t redis_info < <(scripts/ensure_redis.sh)
export REDIS_URL="${redis_info[0]}"
if [[ -n "${redis_info[1]:-}" ]]; then
    trap 'kill "$(cat "${redis_info[1]}")" 2>/dev/null || true' EXIT
fi
echo "== ruff";   .venv/bin/ruff check .
echo "== format"; .venv/bin/ruff format --check .
echo "== mypy";   .venv/bin/mypy
echo "== pytest (REDIS_URL=$REDIS_URL)"
.venv/bin/pytest -q "$@"
