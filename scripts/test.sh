#!/usr/bin/env bash
# Set up a fresh machine and run every check: lint, format, types, tests (real Redis, real HTTP).
#   scripts/test.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh dev
# Best effort, never fatal: the browser and promtool of the observability tests (which skip without them).
if ! command -v chromium >/dev/null || ! command -v promtool >/dev/null; then
    echo "installing chromium and prometheus (apt-get) for the browser and alerting-rule tests" >&2
    { [[ $EUID -eq 0 ]] && { apt-get install -y -qq chromium prometheus || { apt-get update -qq && apt-get install -y -qq chromium prometheus; }; } >/dev/null 2>&1; } \
        || echo "note: chromium/promtool missing (apt-get install chromium prometheus); their tests will skip" >&2
fi
# Best effort, never fatal: the Codex CLI of tests/clients/test_responses_codex.py, at the version its lock pins.
if command -v npm >/dev/null && [[ ! -x .clients/codex/node_modules/.bin/codex ]]; then
    echo "installing the Codex CLI (npm, pinned by tests/clients/codex) into .clients/codex" >&2
    { mkdir -p .clients/codex && cp tests/clients/codex/package.json tests/clients/codex/package-lock.json .clients/codex/ \
        && npm ci --prefix .clients/codex --no-audit --no-fund >/dev/null 2>&1; } \
        || echo "note: the Codex CLI could not be installed (offline?); its tests will skip" >&2
fi
# Best effort, never fatal: Claude Code, pinned by tests/clients/claude-code/package-lock.json, for the
# Messages API's end-to-end test (which skips without it), in the git-ignored .clients/.
if command -v npm >/dev/null && [[ ! -x .clients/claude-code/node_modules/.bin/claude ]]; then
    echo "installing Claude Code (npm, pinned by tests/clients/claude-code) into .clients/claude-code" >&2
    mkdir -p .clients/claude-code && cp tests/clients/claude-code/package*.json .clients/claude-code/
    npm ci --prefix .clients/claude-code --no-audit --no-fund >/dev/null 2>&1 \
        || echo "note: Claude Code could not be installed (npm offline?); its test will skip" >&2
fi
mapfile -t redis_info < <(scripts/ensure_redis.sh)
export REDIS_URL="${redis_info[0]}"
# PostgreSQL for the request log's tests: a database of their own, on a local server or a throwaway cluster.
mapfile -t pg_info < <(scripts/ensure_postgres.sh)
export PG_URL="${pg_info[0]}"
stop_servers() {  # what the ensure scripts started (nothing when a server was already there)
    if [[ -n "${redis_info[1]:-}" ]]; then kill "$(cat "${redis_info[1]}")" 2>/dev/null || true; fi
    if [[ -n "${pg_info[1]:-}" ]]; then scripts/ensure_postgres.sh stop "${pg_info[1]}"; fi
}
trap stop_servers EXIT
echo "== ruff";   .venv/bin/ruff check .
echo "== format"; .venv/bin/ruff format --check .
echo "== mypy";   .venv/bin/mypy
echo "== imports"; .venv/bin/lint-imports --no-cache  # the architecture: pyproject.toml [tool.importlinter]
echo "== pytest (REDIS_URL=$REDIS_URL PG_URL=$PG_URL)"
.venv/bin/pytest -q "$@"
