#!/usr/bin/env bash
# Print a PG_URL the tests can use: a database of the tests' own (`gateway_tests`), which this
# creates when missing, never someone else's. Prefer $PG_URL, then a server on 127.0.0.1:5432
# (user postgres, no password); else start a throwaway cluster (initdb in a temporary folder,
# trust auth, a free port) and print its data folder on the second line, for the caller to stop
# and remove with `scripts/ensure_postgres.sh stop DIR`. Installs PostgreSQL first (apt-get) when
# initdb is missing.
set -euo pipefail
DATABASE=gateway_tests
answers() {  # $1 = url
    .venv/bin/python - "$1" <<'PY' >/dev/null 2>&1
import asyncio, sys, asyncpg
async def main():
    connection = await asyncpg.connect(sys.argv[1], timeout=3)
    await connection.close()
asyncio.run(main())
PY
}
own_database() {  # $1 = url of the server's `postgres` database: create ours there when missing
    .venv/bin/python - "$1" "$DATABASE" <<'PY' >&2
import asyncio, sys, asyncpg
async def main():
    connection = await asyncpg.connect(sys.argv[1], timeout=5)
    try:
        if not await connection.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", sys.argv[2]):
            await connection.execute(f'CREATE DATABASE "{sys.argv[2]}"')
    finally:
        await connection.close()
asyncio.run(main())
PY
}
tool() {  # the PostgreSQL program $1: on the PATH, or Debian's versioned folder
    command -v "$1" 2>/dev/null || ls -d /usr/lib/postgresql/*/bin/"$1" 2>/dev/null | sort -V | tail -1
}
as_owner=()
if [[ "$(id -u)" == 0 ]]; then as_owner=(runuser -u postgres --); fi  # PostgreSQL refuses to run as root

if [[ "${1:-}" == stop ]]; then
    "${as_owner[@]}" "$(tool pg_ctl)" -D "$2" -m fast -w stop >/dev/null 2>&1 || true
    rm -rf "$(dirname "$2")"
    exit 0
fi
if [[ -n "${PG_URL:-}" ]] && answers "$PG_URL"; then echo "$PG_URL"; exit 0; fi
if answers "postgresql://postgres@127.0.0.1:5432/postgres"; then
    own_database "postgresql://postgres@127.0.0.1:5432/postgres"
    echo "postgresql://postgres@127.0.0.1:5432/$DATABASE"
    exit 0
fi
if [[ -z "$(tool initdb)" ]]; then
    SUDO=""; [[ "$(id -u)" != 0 ]] && SUDO="sudo"
    { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq postgresql; } >&2
fi
initdb="$(tool initdb)"; pg_ctl="$(tool pg_ctl)"
port="$(.venv/bin/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
dir="$(mktemp -d)"
if [[ "$(id -u)" == 0 ]]; then chown postgres:postgres "$dir"; fi
"${as_owner[@]}" "$initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --no-sync >&2
"${as_owner[@]}" "$pg_ctl" -D "$dir/data" -l "$dir/log" -w \
    -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off" start >&2
own_database "postgresql://postgres@127.0.0.1:$port/postgres"
echo "postgresql://postgres@127.0.0.1:$port/$DATABASE"
echo "$dir/data"
