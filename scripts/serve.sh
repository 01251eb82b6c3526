#!/usr/bin/env bash
# Set up a fresh machine and run the gateway in the foreground: scripts/serve.sh [gateway serve options]
#   e.g. scripts/serve.sh --config config.yaml --port 8080 --workers 2
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
exec .venv/bin/gateway serve "$@"
