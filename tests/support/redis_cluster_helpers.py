"""Real Redis topologies for tests, started by the tests themselves from the `redis-server` and
`redis-cli` binaries (scripts/ensure_redis.sh installs them): a three-master Redis Cluster, and a
master with a replica watched by Sentinels. Each server runs on a free loopback port, in a
temporary directory of its own, and is stopped (by its pid) when the fixture ends.

The fixtures skip, naming what is missing, only when the binaries are not installed.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis

START_DEADLINE_S = 60.0  # generous: a loaded 2-core machine starts processes slowly


def need_redis_binaries() -> None:
    missing = [name for name in ("redis-server", "redis-cli") if shutil.which(name) is None]
    if missing:
        pytest.skip(f"{' and '.join(missing)} not installed (scripts/ensure_redis.sh installs redis-server)")


def binary(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        pytest.skip(f"{name} not installed (scripts/ensure_redis.sh installs redis-server)")
    return found


def free_ports(count: int) -> list[int]:
    """Ports nothing listens on now, each with its +10000 cluster bus port free as well."""
    ports: list[int] = []
    while len(ports) < count:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port in ports or port + 10000 > 65535:
            continue
        with socket.socket() as bus:
            try:
                bus.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        ports.append(port)
    return ports


def command(client: redis.Redis, *args: Any) -> Any:
    """A raw command (CLUSTER …, SENTINEL …, MIGRATE), its reply as redis-py parses it."""
    return client.execute_command(*args)  # type: ignore[no-untyped-call]


def wait_for(condition: Callable[[], bool], what: str, deadline_s: float = START_DEADLINE_S) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except (redis.RedisError, OSError):
            pass
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@dataclass
class RedisProcess:
    port: int
    directory: Path
    process: subprocess.Popen[bytes]
    password: str | None = None  # its `requirepass`, if any

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis(
            host="127.0.0.1", port=self.port, password=self.password, socket_timeout=5, socket_connect_timeout=5
        )

    def kill(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        self.kill()  # nothing of a throwaway server is worth its shutdown (a master waits for lagging replicas)


def start_server(root: Path, port: int, *options: str) -> RedisProcess:
    directory = root / str(port)
    directory.mkdir()
    command = [
        binary("redis-server"),
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        str(directory),
        "--logfile",
        str(directory / "redis.log"),
        *options,
    ]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # noqa: S603 - fixed arguments
    server = RedisProcess(port, directory, process)
    wait_for(lambda: bool(server.client().ping()), f"redis-server on port {port}")
    return server


@dataclass
class Cluster:
    """Three masters, no replicas: every slot on one of them."""

    nodes: list[RedisProcess]
    root: Path

    @property
    def url(self) -> str:
        return self.nodes[0].url  # any node: the client discovers the others

    def node_ids(self) -> dict[int, str]:
        return {node.port: command(node.client(), "CLUSTER MYID").decode() for node in self.nodes}

    def owner(self, slot: int) -> RedisProcess:
        for start, end, primary, *_ in command(self.nodes[0].client(), "CLUSTER SLOTS"):
            if int(start) <= slot <= int(end):
                return next(node for node in self.nodes if node.port == int(primary[1]))
        raise AssertionError(f"no node serves slot {slot}")

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
        shutil.rmtree(self.root, ignore_errors=True)


def start_cluster() -> Cluster:
    need_redis_binaries()
    root = Path(tempfile.mkdtemp(prefix="gateway-redis-cluster-"))
    nodes: list[RedisProcess] = []
    cluster = Cluster(nodes, root)
    try:
        for port in free_ports(3):
            options = (
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-node-timeout",
                "5000",
            )
            nodes.append(start_server(root, port, *options))
        create = [binary("redis-cli"), "--cluster", "create", *(f"127.0.0.1:{node.port}" for node in nodes)]
        subprocess.run(  # noqa: S603
            [*create, "--cluster-replicas", "0", "--cluster-yes"], check=True, capture_output=True, timeout=60
        )
        for node in nodes:

            def ok(node: RedisProcess = node) -> bool:
                return bool(node.client().cluster("INFO")["cluster_state"] == "ok")

            wait_for(ok, "the cluster to be ok")
    except BaseException:
        cluster.stop()
        raise
    return cluster


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[Cluster]:
    """A real three-master Redis Cluster, for the whole session."""
    cluster = start_cluster()
    try:
        yield cluster
    finally:
        cluster.stop()


def migrate_slot(cluster: Cluster, slot: int, pause_s: float = 0.0) -> tuple[RedisProcess, RedisProcess]:
    """Move one slot to another master while clients use it, as `redis-cli --cluster reshard` does:
    IMPORTING on the target, MIGRATING on the source, its keys moved a few at a time (clients get
    ASK, or TRYAGAIN for a script whose keys are split), then the slot assigned to the target on
    every master (clients with the old map get MOVED). Returns (source, target)."""
    ids = cluster.node_ids()
    source = cluster.owner(slot)
    target = next(node for node in cluster.nodes if node.port != source.port)
    source_client, target_client = source.client(), target.client()
    command(target_client, "CLUSTER SETSLOT", slot, "IMPORTING", ids[source.port])
    command(source_client, "CLUSTER SETSLOT", slot, "MIGRATING", ids[target.port])
    while keys := command(source_client, "CLUSTER GETKEYSINSLOT", slot, 2):
        command(source_client, "MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", *keys)
        time.sleep(pause_s)  # clients meanwhile find the slot split between the two
    for node in (target, source, *(n for n in cluster.nodes if n.port not in (source.port, target.port))):
        command(node.client(), "CLUSTER SETSLOT", slot, "NODE", ids[target.port])
    return source, target


@dataclass
class SentinelSetup:
    """A master, its replica and three Sentinels watching them under `service_name`."""

    master: RedisProcess
    replica: RedisProcess
    sentinels: list[RedisProcess]
    root: Path
    service_name: str = "mymaster"
    down_after_ms: int = 1000
    failover_timeout_ms: int = 3000
    stopped: list[RedisProcess] = field(default_factory=list)

    @property
    def addresses(self) -> list[str]:
        return [f"127.0.0.1:{sentinel.port}" for sentinel in self.sentinels]

    def master_port(self) -> int:
        _, port = command(self.sentinels[0].client(), "SENTINEL GET-MASTER-ADDR-BY-NAME", self.service_name)
        return int(port)

    def stop(self) -> None:
        for server in (*self.sentinels, self.replica, self.master):
            server.stop()
        shutil.rmtree(self.root, ignore_errors=True)


def start_sentinels(service_name: str = "mymaster", password: str | None = None) -> SentinelSetup:
    """`password`: the Sentinels' own `requirepass` (and what they send each other); the master and
    its replica stay without one."""
    need_redis_binaries()
    root = Path(tempfile.mkdtemp(prefix="gateway-redis-sentinel-"))
    ports = free_ports(5)
    started: list[RedisProcess] = []
    try:
        master = start_server(root, ports[0])
        started.append(master)
        replica = start_server(root, ports[1], "--replicaof", "127.0.0.1", str(ports[0]))
        started.append(replica)
        wait_for(lambda: replica.client().info("replication")["master_link_status"] == "up", "the replica to sync")
        sentinels = []
        for port in ports[2:]:
            directory = root / str(port)
            directory.mkdir()
            conf = directory / "sentinel.conf"
            auth = f"requirepass {password}\nsentinel sentinel-pass {password}\n" if password else ""
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {directory}\nlogfile {directory / 'sentinel.log'}\n"
                f"sentinel monitor {service_name} 127.0.0.1 {ports[0]} 2\n"
                f"sentinel down-after-milliseconds {service_name} 1000\n"
                f"sentinel failover-timeout {service_name} 3000\n"
                f"sentinel parallel-syncs {service_name} 1\n{auth}"
            )
            process = subprocess.Popen(  # noqa: S603
                [binary("redis-server"), str(conf), "--sentinel"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            sentinel = RedisProcess(port, directory, process, password)
            started.append(sentinel)
            wait_for(sentinel.client().ping, f"sentinel on port {port}")
            sentinels.append(sentinel)
        setup = SentinelSetup(master, replica, sentinels, root, service_name)
        for sentinel in sentinels:  # every Sentinel knows the others and the replica before a test kills anything

            def ready(sentinel: RedisProcess = sentinel) -> bool:
                fields = command(sentinel.client(), "SENTINEL MASTER", service_name)
                return int(fields["num-other-sentinels"]) >= 2 and int(fields["num-slaves"]) >= 1

            wait_for(ready, "the Sentinels to find each other and the replica")
    except BaseException:
        for server in started:
            server.stop()
        shutil.rmtree(root, ignore_errors=True)
        raise
    return setup
