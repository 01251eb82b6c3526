"""Helpers for the observability tests: reading the access log as written, and parsing /metrics."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
from aiohttp import ClientSession
from prometheus_client.parser import text_string_to_metric_families


async def log_lines(path: Path, count: int, *, parse: bool = True, timeout_s: float = 30.0) -> list[Any]:
    """The access log's lines (JSON-decoded unless `parse=False`), once its writer thread has written
    `count` (`timeout_s` bounds a hang: the writer takes moments, more on a loaded machine)."""
    for _ in range(int(timeout_s / 0.02)):
        lines = _read(path).splitlines()
        if len(lines) >= count:
            return [orjson.loads(line) for line in lines] if parse else lines
        await asyncio.sleep(0.02)
    raise AssertionError(f"the access log has fewer than {count} lines: {_read(path)}")


def _read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of a scrape, by (name, labels)."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(scrape: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float:
    """The sum of the samples named `name` whose labels include `labels` (0 when there is none)."""
    wanted = set(labels.items())
    return sum(v for (n, have), v in scrape.items() if n == name and wanted <= have)


async def scrape(
    http: ClientSession, url: str, token: str | None = None
) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with http.get(url, headers=headers) as response:
        assert response.status == 200, await response.text()
        return samples(await response.text())


async def once_redis_answers(http: ClientSession, url: str, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    """(status, JSON body) of `url` (/ready, /admin/deployments) once its `redis` is not "unreachable".
    The check gives Redis 1 s to connect and answer a PING: a loaded machine's first probe may miss
    that, so it is asked again (for 30 s at most) rather than read as Redis being down."""
    async with asyncio.timeout(30):
        while True:
            async with http.get(url, headers=headers) as response:
                status, body = response.status, await response.json()
            if body.get("redis") != "unreachable":
                return status, body
            await asyncio.sleep(0.1)
