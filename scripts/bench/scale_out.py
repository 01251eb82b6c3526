"""Scale-out: three gateways behind nginx, one Redis vs a three-master Redis Cluster (not run in CI).

Starts, all on 127.0.0.1 and all in one temporary directory that is removed at exit:
  - the benchmark harness's mock upstream (/work/shared/bench/mock_upstream.sh, on a free port),
  - Redis: one `redis-server` (`redis.mode: single`), then three `--cluster-enabled yes` masters
    joined by `redis-cli --cluster create ... --cluster-replicas 0` (`redis.mode: cluster`),
  - three `gateway serve` processes (one worker each) sharing that Redis,
  - nginx in front of them (an `upstream` block of the three ports, keepalive connections),
and for each Redis runs wrk through nginx twice:
  throughput  key `load` (a limit it never reaches: the limiter still runs): requests/s, and
              Redis commands per request from `INFO commandstats` (summed over the nodes);
  exactness   key `limited` (`limits: {rpm: N}`), shared by the three gateways: a token bucket
              that starts full and refills N per minute, so in T seconds at most N + N*T/60
              requests may be admitted; exact is admitted == that bound rounded down (less one: the
              refill due as wrk stops may come too late), never more; fewer only with 503s, when
              Redis failed (`limits.on_redis_error: closed` never admits without the limit).

Usage: .venv/bin/python scripts/bench/scale_out.py [--duration 10] [--connections 32] [--rpm 300]
Needs: nginx (+ echo module, for the mock) and wrk from the harness (/work/shared/bench/setup.sh),
redis-server and redis-cli 7. Every process it starts is stopped by its own PID at exit, also on
Ctrl-C, SIGTERM or an error. Absolute figures depend on the machine: see BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import yaml

GATEWAY = Path(sys.executable).with_name("gateway")
HARNESS = Path(os.environ.get("BENCH_HARNESS", "/work/shared/bench"))
BODY = HARNESS / "bodies" / "completion.json"
GATEWAYS = 3
LOAD_KEY = "bench-load-key-0123456789abcdef"
LIMITED_KEY = "bench-limited-key-0123456789abcdef"

# wrk script: POST the body, count answers by status in every thread, print the totals at the end.
WRK_LUA = r"""
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args)
  local f = assert(io.open(args[1], "rb")); wrk.body = f:read("*a"); f:close()
  wrk.method = "POST"; wrk.headers["Content-Type"] = "application/json"
  counts = {}
end
function response(status, headers, body) counts[status] = (counts[status] or 0) + 1 end
function done(summary, latency, requests)
  local total = {}
  for _, thread in ipairs(threads) do
    for status, n in pairs(thread:get("counts")) do total[status] = (total[status] or 0) + n end
  end
  local parts = {}
  for status, n in pairs(total) do table.insert(parts, status .. "=" .. n) end
  io.write(string.format("RESULT requests=%d duration_s=%.3f p50_ms=%.2f p99_ms=%.2f socket_errors=%d %s\n",
    summary.requests, summary.duration / 1e6, latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    table.concat(parts, " ")))
end
"""

NGINX_CONF = """
worker_processes 1;
pid {run}/nginx.pid;
error_log {run}/nginx-error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {run}/body; proxy_temp_path {run}/proxy;
    fastcgi_temp_path {run}/fastcgi; uwsgi_temp_path {run}/uwsgi; scgi_temp_path {run}/scgi;
    upstream gateways {{
{servers}
        keepalive 64;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://gateways;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
        }}
    }}
}}
"""


class Stopped(Exception):
    """SIGTERM arrived: unwind so that every `finally` stops what it started."""


def on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise Stopped


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def free_cluster_port() -> int:
    """A free port for a cluster node: at most 55535, with its bus port (port + 10000) free too."""
    for _ in range(200):
        port = random.randint(20000, 55535)  # noqa: S311 - not for security
        try:
            for candidate in (port, port + 10000):
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", candidate))
        except OSError:
            continue
        return port
    raise RuntimeError("no free port pair for a cluster node")


def exe(name: str) -> str:
    """The absolute path of a tool on PATH (nginx, wrk, redis-server, redis-cli)."""
    path = shutil.which(name)
    if path is None:
        raise SystemExit(f"{name} not found (see /work/shared/bench/setup.sh)")
    return path


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class Processes:
    """Every process started here, stopped by its own PID (TERM, then KILL after a grace)."""

    def __init__(self, run: Path) -> None:
        self.run = run
        self.started: list[tuple[str, subprocess.Popen[bytes]]] = []

    def start(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        logfile = (self.run / f"{name}.log").open("wb")
        process = subprocess.Popen(  # noqa: S603 - fixed binaries, arguments built here
            argv, stdout=logfile, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
        )
        logfile.close()
        self.started.append((name, process))
        return process

    def stop(self, process: subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(grace_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.started = [(n, p) for n, p in self.started if p is not process]

    def stop_all(self) -> None:
        for _, process in reversed(list(self.started)):
            self.stop(process)

    def tail(self, name: str) -> str:
        path = self.run / f"{name}.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""


def wait_http(url: str, process: subprocess.Popen[bytes], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{url}: the process exited ({process.returncode}) during start-up")
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:  # noqa: S310 - loopback http only
                if answer.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer 200 within {timeout_s:.0f} s")


def redis_cli(port: int, *args: str) -> str:
    return subprocess.run(  # noqa: S603 - fixed binary
        [exe("redis-cli"), "-p", str(port), *args], capture_output=True, text=True, check=True, timeout=30
    ).stdout


def wait_redis(port: int, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if redis_cli(port, "PING").strip() == "PONG":
                return
        except subprocess.CalledProcessError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"redis on port {port} did not start")


def start_redis(procs: Processes, run: Path, name: str, *, cluster: bool) -> int:
    port = free_cluster_port() if cluster else free_port()
    directory = run / name
    directory.mkdir()
    argv = [exe("redis-server"), "--port", str(port), "--bind", "127.0.0.1", "--dir", str(directory)]
    argv += ["--save", "", "--appendonly", "no", "--protected-mode", "no"]
    if cluster:
        argv += ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"]
    procs.start(name, argv)
    wait_redis(port)
    return port


def start_cluster(procs: Processes, run: Path) -> list[int]:
    ports = [start_redis(procs, run, f"redis-cluster-{i}", cluster=True) for i in range(3)]
    nodes = [f"127.0.0.1:{port}" for port in ports]
    subprocess.run(  # noqa: S603 - fixed binary
        [exe("redis-cli"), "--cluster", "create", *nodes, "--cluster-replicas", "0", "--cluster-yes"],
        capture_output=True,
        check=True,
        timeout=60,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if all("cluster_state:ok" in redis_cli(port, "CLUSTER", "INFO") for port in ports):
            return ports
        time.sleep(0.2)
    raise RuntimeError("the cluster did not reach cluster_state:ok")


def gateway_config(mock: str, redis: dict[str, str], rpm: int) -> dict[str, object]:
    return {
        "server": {"host": "127.0.0.1", "workers": 1},
        "redis": redis,
        # Closed: a Redis call that fails is a 503, never an admission without the shared limit.
        "limits": {"on_redis_error": "closed"},
        "keys": [
            # A limit it never reaches: the limiter (and its Redis round trip) runs on every request.
            {"name": "load", "key": "${BENCH_LOAD_KEY}", "limits": {"rpm": 1_000_000_000}},
            {"name": "limited", "key": "${BENCH_LIMITED_KEY}", "limits": {"rpm": rpm}},
        ],
        "deployments": [{"name": "mock-model", "provider": {"type": "openai", "base_url": f"{mock}/v1"}}],
    }


@dataclass
class WrkResult:
    requests: int
    duration_s: float
    wall_s: float
    p50_ms: float
    p99_ms: float
    socket_errors: int
    statuses: dict[int, int]

    @property
    def rps(self) -> float:
        return self.requests / self.duration_s if self.duration_s else 0.0


def wrk(run: Path, url: str, key: str, duration_s: int, connections: int) -> WrkResult:
    script = run / "count.lua"
    script.write_text(WRK_LUA)
    argv = [exe("wrk"), "-t2", f"-c{connections}", f"-d{duration_s}s", "--timeout", "10s", "-s", str(script)]
    argv += ["-H", f"Authorization: Bearer {key}", url, "--", str(BODY)]
    started = time.monotonic()
    out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=duration_s + 60).stdout  # noqa: S603
    wall_s = time.monotonic() - started
    line = next((ln for ln in out.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"wrk printed no result:\n{out}")
    fields = dict(item.split("=", 1) for item in line.split()[1:])
    statuses = {int(k): int(v) for k, v in fields.items() if k.isdigit()}
    return WrkResult(
        requests=int(fields["requests"]),
        duration_s=float(fields["duration_s"]),
        wall_s=wall_s,
        p50_ms=float(fields["p50_ms"]),
        p99_ms=float(fields["p99_ms"]),
        socket_errors=int(fields["socket_errors"]),
        statuses=statuses,
    )


def command_stats(ports: list[int]) -> dict[str, int]:
    """Calls per command, summed over the nodes (`INFO commandstats`; Lua's own calls included)."""
    total: dict[str, int] = {}
    for port in ports:
        for match in re.finditer(r"^cmdstat_([^:]+):calls=(\d+)", redis_cli(port, "INFO", "commandstats"), re.M):
            total[match[1]] = total.get(match[1], 0) + int(match[2])
    return total


def info_field(port: int, section: str, field: str) -> int:
    found = re.search(rf"^{field}:(\d+)", redis_cli(port, "INFO", section), re.M)
    return int(found[1]) if found else 0


@dataclass
class Outcome:
    name: str
    load: WrkResult
    per_request: dict[str, float]
    clients: list[int]
    limited: WrkResult
    rpm: int

    def bound(self) -> int:
        """What a bucket of `rpm` that starts full may admit over the run (wall time: an upper bound)."""
        return int(self.rpm + self.rpm * self.limited.wall_s / 60)

    def verdict(self) -> str:
        admitted, failed = self.limited.statuses.get(200, 0), self.limited.statuses.get(503, 0)
        low = int(self.rpm + self.rpm * self.limited.duration_s / 60)
        if admitted > self.bound():
            return f"OVER by {admitted - self.bound()}"
        if admitted >= low - 1:  # the refill due at the very end of the run may land after wrk stopped
            return "exact"
        return f"under by {low - admitted}" + (f" ({failed} x 503: Redis failed)" if failed else "")


def run_mode(
    name: str, procs: Processes, run: Path, mock: str, redis: dict[str, str], ports: list[int], args: argparse.Namespace
) -> Outcome:
    config = run / f"gateway-{name}.yaml"
    config.write_text(yaml.safe_dump(gateway_config(mock, redis, args.rpm), sort_keys=False))
    env = {**os.environ, "BENCH_LOAD_KEY": LOAD_KEY, "BENCH_LIMITED_KEY": LIMITED_KEY}
    gateway_ports = [free_port() for _ in range(GATEWAYS)]
    started: list[subprocess.Popen[bytes]] = []
    try:
        for i, port in enumerate(gateway_ports):
            argv = [str(GATEWAY), "serve", "--config", str(config), "--port", str(port), "--log-level", "WARNING"]
            started.append(procs.start(f"gateway-{name}-{i}", argv, env))
        for port, process in zip(gateway_ports, started, strict=True):
            wait_http(f"http://127.0.0.1:{port}/ready", process)
        nginx_port = free_port()
        servers = "\n".join(f"        server 127.0.0.1:{port};" for port in gateway_ports)
        conf = run / f"nginx-{name}.conf"
        conf.write_text(NGINX_CONF.format(run=run, servers=servers, port=nginx_port))
        nginx = procs.start(
            f"nginx-{name}", [exe("nginx"), "-e", str(run / "nginx-error.log"), "-c", str(conf), "-g", "daemon off;"]
        )
        started.append(nginx)
        wait_http(f"http://127.0.0.1:{nginx_port}/health", nginx)
        url = f"http://127.0.0.1:{nginx_port}/v1/completions"

        log(f"{name}: warm-up 2 s")
        wrk(run, url, LOAD_KEY, 2, args.connections)
        before = command_stats(ports)
        log(f"{name}: throughput {args.duration} s, key 'load'")
        load = wrk(run, url, LOAD_KEY, args.duration, args.connections)
        after = command_stats(ports)
        clients = [info_field(port, "clients", "connected_clients") for port in ports]
        served = max(1, load.requests)
        per_request = {
            cmd: (after[cmd] - before.get(cmd, 0)) / served for cmd in after if after[cmd] > before.get(cmd, 0)
        }
        per_request.pop("info", None)  # our own probes
        log(f"{name}: exactness {args.duration} s, key 'limited' (rpm {args.rpm})")
        limited = wrk(run, url, LIMITED_KEY, args.duration, args.connections)
        return Outcome(name, load, per_request, clients, limited, args.rpm)
    finally:
        for process in reversed(started):
            procs.stop(process)


def report(outcomes: list[Outcome], args: argparse.Namespace) -> None:
    print(
        f"\n{GATEWAYS} gateways (1 worker each) behind nginx, wrk -t2 -c{args.connections}, {args.duration} s per run\n"
    )
    print("| Redis | req/s | p50 ms | p99 ms | non-200 | Redis cmds/req | clients per node |")
    print("|---|---|---|---|---|---|---|")
    for o in outcomes:
        non200 = o.load.requests - o.load.statuses.get(200, 0) + o.load.socket_errors
        cmds = sum(o.per_request.values())
        print(
            f"| {o.name} | {o.load.rps:.0f} | {o.load.p50_ms:.1f} | {o.load.p99_ms:.1f} | {non200} "
            f"| {cmds:.2f} | {', '.join(map(str, o.clients))} |"
        )
    print("\nRedis commands per request (throughput run; Lua's inner calls included):")
    for o in outcomes:
        top = sorted(o.per_request.items(), key=lambda kv: -kv[1])
        print(f"  {o.name}: " + ", ".join(f"{cmd} {n:.2f}" for cmd, n in top if n >= 0.005))
    print(f"\nShared limit: key 'limited', rpm {args.rpm}, through all {GATEWAYS} gateways")
    print("| Redis | requests | 200 | 429 | 503 | other | run s | bound N+N*T/60 | verdict |")
    print("|---|---|---|---|---|---|---|---|---|")
    for o in outcomes:
        s = o.limited.statuses
        other = o.limited.requests - s.get(200, 0) - s.get(429, 0) - s.get(503, 0) + o.limited.socket_errors
        print(
            f"| {o.name} | {o.limited.requests} | {s.get(200, 0)} | {s.get(429, 0)} | {s.get(503, 0)} | {other} "
            f"| {o.limited.duration_s:.2f} | {o.bound()} | {o.verdict()} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--duration", type=int, default=10, help="seconds per wrk run (default 10)")
    parser.add_argument("--connections", type=int, default=32, help="wrk connections (default 32)")
    parser.add_argument("--rpm", type=int, default=300, help="the shared limit of key 'limited' (default 300)")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (logs, configs) for a look")
    args = parser.parse_args()
    for tool in ("nginx", "wrk", "redis-server", "redis-cli"):
        exe(tool)
    signal.signal(signal.SIGTERM, on_sigterm)
    run = Path(tempfile.mkdtemp(prefix="scale-out-"))
    procs = Processes(run)
    mock_env = {**os.environ, "MOCK_PORT": str(free_port()), "MOCK_CPUS": "none", "BENCH_RUN_DIR": str(run / "harness")}
    mock_script = str(HARNESS / "mock_upstream.sh")
    mock_started = False
    try:
        mock_started = True  # its stop acts on its own pidfile only: harmless if the start never got there
        subprocess.run([mock_script, "start"], env=mock_env, check=True, capture_output=True, timeout=60)  # noqa: S603
        mock = f"http://127.0.0.1:{mock_env['MOCK_PORT']}"
        outcomes = []
        single = start_redis(procs, run, "redis-single", cluster=False)
        outcomes.append(
            run_mode(
                "single", procs, run, mock, {"mode": "single", "url": f"redis://127.0.0.1:{single}"}, [single], args
            )
        )
        cluster = start_cluster(procs, run)
        cluster_redis = {"mode": "cluster", "url": f"redis://127.0.0.1:{cluster[0]}"}
        outcomes.append(run_mode("cluster (3 masters)", procs, run, mock, cluster_redis, cluster, args))
        report(outcomes, args)
    except (KeyboardInterrupt, Stopped):
        log("interrupted: cleaning up")
        raise SystemExit(130) from None
    except (subprocess.CalledProcessError, RuntimeError) as error:
        log(f"failed: {error}")
        for name, _ in procs.started:
            log(f"--- {name}.log\n{procs.tail(name)}")
        raise SystemExit(1) from None
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the cleanup short
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        procs.stop_all()
        if mock_started:
            subprocess.run([mock_script, "stop"], env=mock_env, check=False, capture_output=True, timeout=60)  # noqa: S603
        if args.keep:
            log(f"kept {run}")
        else:
            shutil.rmtree(run, ignore_errors=True)


if __name__ == "__main__":
    main()
