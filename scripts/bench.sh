#!/usr/bin/env bash
# Run ../shared/bench against this gateway beside its floor and its peers, in one session:
#   scripts/bench.sh [targets...]      targets: direct bare gateway portkey litellm (default: all but litellm),
#                                      gateway-cache-memory gateway-cache-redis (every request a cache HIT),
#                                      gateway-observability-off (metrics and access log off; `gateway` has both on),
#                                      gateway-1w gateway-2w (one and two workers: run with GW_CPUS=0,1)
# Env: BENCH_DIR (../shared/bench), DURATION/REPS/WARMUP/CONNS/MODES (see its load.sh),
#      RESULTS_DIR (.bench/results). Prints one summary table of this session at the end.
# Needs the harness installed once: $BENCH_DIR/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
BENCH_DIR="${BENCH_DIR:-$ROOT/../shared/bench}"
export RESULTS_DIR="${RESULTS_DIR:-$ROOT/.bench/results}"
mkdir -p "$RESULTS_DIR"
scripts/bootstrap.sh
since="$(date -u +%Y-%m-%dT%H:%M:%S)"
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(direct bare gateway portkey)
for target in "${targets[@]}"; do
    case "$target" in
        direct)  "$BENCH_DIR/run_direct.sh" ;;
        portkey) "$BENCH_DIR/run_peer_portkey.sh" ;;
        litellm) "$BENCH_DIR/run_peer_litellm.sh" ;;
        bare)    "$BENCH_DIR/run_gateway.sh" bare-aiohttp http://127.0.0.1:8090/v1/completions -- \
                     "$ROOT/.venv/bin/python" "$BENCH_DIR/limit/bare_relay.py" 8090 ;;
        gateway|gateway-cache-memory|gateway-cache-redis|gateway-observability-off|gateway-1w|gateway-2w)
                 "$BENCH_DIR/run_gateway.sh" "$target" http://127.0.0.1:8080/v1/completions -- \
                     "$ROOT/.venv/bin/gateway" serve --config "$ROOT/scripts/bench/$target.yaml" --log-level WARNING ;;
        *) echo "unknown target: $target" >&2; exit 2 ;;
    esac
done
python3 "$BENCH_DIR/summarize.py" "$RESULTS_DIR/raw.jsonl" --since "$since" | tee "$RESULTS_DIR/summary-$since.md"
# The issue's figures: CPU per request over the bare relay's, Portkey's over ours, c=1 and TTFB over direct.
python3 scripts/bench/ratios.py "$RESULTS_DIR/raw.jsonl" --since "$since" | tee -a "$RESULTS_DIR/summary-$since.md"
