#!/usr/bin/env bash
# Print a REDIS_URL the tests can use: a throwaway redis-server of their own on a free port, in a
# temporary folder, saving nothing (its pid file is printed on the second line, for the caller to
# stop it). Never a Redis that happens to answer on 127.0.0.1:6379 or that $REDIS_URL names: that
# may be someone's real one. $GATEWAY_TEST_REDIS_URL opts in to a server of your choosing (the
# tests only write keys under a prefix of their own, and delete them). Installs redis-server (and
# redis-cli) first when they are missing, saying so.
set -euo pipefail
answers() {  # $1 = url
    .venv/bin/python - "$1" <<'PY' >/dev/null 2>&1
import sys, redis
redis.Redis.from_url(sys.argv[1], socket_connect_timeout=1, socket_timeout=1).ping()
PY
}
# The Cluster and Sentinel tests start redis-server and redis-cli themselves: install them even
# when a Redis already answers (redis-server's package brings redis-cli).
if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
    SUDO=""; [[ "$(id -u)" != 0 ]] && SUDO="sudo"
    echo "installing redis-server and redis-cli (apt-get install redis-server) for the tests" >&2
    { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq redis-server; } >&2
fi
if [[ -n "${GATEWAY_TEST_REDIS_URL:-}" ]]; then
    answers "$GATEWAY_TEST_REDIS_URL" || { echo "GATEWAY_TEST_REDIS_URL does not answer" >&2; exit 1; }
    echo "$GATEWAY_TEST_REDIS_URL"; exit 0
fi
port="$(.venv/bin/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
dir="$(mktemp -d)"
redis-server --daemonize yes --bind 127.0.0.1 --port "$port" --save "" --appendonly no \
    --dir "$dir" --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" >&2
for _ in $(seq 50); do answers "redis://127.0.0.1:$port/0" && break; sleep 0.1; done
echo "redis://127.0.0.1:$port/0"
echo "$dir/redis.pid"
