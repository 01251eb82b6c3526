"""PostgreSQL for tests: the shared server's URL (`PG_URL`, which scripts/test.sh sets, after
scripts/ensure_postgres.sh made a database of its own), a schema of each test's own in it, and a
throwaway cluster a test can stop and start (the shared server is never stopped).

Without `PG_URL` a developer's run uses 127.0.0.1:5432 when it answers and skips otherwise; under
CI (`CI` set) a missing or silent server fails the test instead: no PostgreSQL test passes there
by being skipped.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

LOCAL_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


async def server_url() -> str:
    """The URL of a server (and a database) the tests may create schemas in."""
    url = os.environ.get("PG_URL", "")
    if await answers(url or LOCAL_URL):
        return url or LOCAL_URL
    where = f"PG_URL={_without_password(url)}" if url else f"{LOCAL_URL} (PG_URL is not set)"
    if url or os.environ.get("CI"):
        pytest.fail(f"PostgreSQL does not answer at {where}: run the tests with scripts/test.sh")
    pytest.skip(f"PostgreSQL does not answer at {where}; scripts/test.sh starts one")


async def answers(url: str) -> bool:
    try:
        connection = await asyncpg.connect(url, timeout=3)
    except (OSError, TimeoutError, asyncpg.PostgresError):
        return False
    await connection.close()
    return True


def with_schema(url: str, schema: str) -> str:
    """`url` whose connections put their tables in `schema` (asyncpg passes unknown query
    parameters on as server settings)."""
    parts = urlsplit(url)
    query = f"{parts.query}&search_path={schema}" if parts.query else f"search_path={schema}"
    return urlunsplit(parts._replace(query=query))


async def create_schema(url: str) -> str:
    schema = f"reqlog_{uuid.uuid4().hex[:12]}"
    connection = await asyncpg.connect(url)
    try:
        await connection.execute(f"CREATE SCHEMA {schema}")
    finally:
        await connection.close()
    return schema


async def drop_schema(url: str, schema: str) -> None:
    connection = await asyncpg.connect(url)
    try:
        await connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    finally:
        await connection.close()


def _without_password(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _binary(name: str) -> str:
    found = shutil.which(name) or next(iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)), None)
    if found is None:
        pytest.fail(f"{name} is missing: scripts/ensure_postgres.sh installs PostgreSQL (apt-get install postgresql)")
    return found


class ThrowawayPostgres:
    """A cluster of the test's own (initdb in a temporary folder, trust auth, on a free port) that it
    may stop and start again. As root it runs as the `postgres` user, as PostgreSQL requires."""

    def __init__(self) -> None:
        self.port = free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="gateway-pg-"))
        self.data = self.folder / "data"
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self._as_postgres: list[str] = []
        if os.geteuid() == 0:
            shutil.chown(self.folder, "postgres", "postgres")
            self._as_postgres = ["runuser", "-u", "postgres", "--"]

    def initialise(self) -> ThrowawayPostgres:
        self._run(_binary("initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
        return self

    def start(self) -> None:
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50"
        self._run(_binary("pg_ctl"), "-D", str(self.data), "-l", str(self.folder / "log"), "-o", options, "-w", "start")

    def stop(self) -> None:
        self._run(_binary("pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def remove(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)

    def _run(self, *command: str) -> None:
        started = time.monotonic()
        done = subprocess.run(  # noqa: S603 - PostgreSQL's own tools
            [*self._as_postgres, *command], capture_output=True, text=True, timeout=60, check=False
        )
        if done.returncode != 0:
            log = (self.folder / "log").read_text() if (self.folder / "log").exists() else ""
            raise AssertionError(f"{command[0]} failed after {time.monotonic() - started:.1f}s: {done.stderr}\n{log}")
