"""Reading the request log back through the admin API, as an operator's script would, and the
gateway configs its tests share."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from aiohttp import ClientSession
from aiohttp.test_utils import TestServer

ADMIN_KEY = "adm-" + "0f1e2d3c4b5a6978" * 3
ALPHA_KEY = "gw-alpha-0123456789abcdef"
BETA_KEY = "gw-beta-0123456789abcdef"
ENV = {"ADMIN": ADMIN_KEY, "ALPHA": ALPHA_KEY, "BETA": BETA_KEY}
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
PRICE = {"prompt_per_1m": 1000, "completion_per_1m": 2000}  # a token costs $0.001 or $0.002


def logged_config(url: str, **request_log: Any) -> dict[str, Any]:
    """Two priced mock deployments, one guarded by a deny rule; keys of two teams (alpha's limited
    to 3 requests a minute); the admin API; the request log at `url`, flushed every 50 ms."""
    mock = {"type": "mock"}
    return {
        "deployments": [
            {"name": "mock", "aliases": ["mock-model"], "provider": mock, "price": PRICE, "policies": ["guard"]},
            {"name": "other", "provider": mock, "price": PRICE},
        ],
        "policies": {"guard": {"input": [{"check": "regex", "pattern": "forbidden", "action": "deny"}]}},
        "keys": [
            {"name": "alpha", "key": "${ALPHA}", "metadata": {"team": "search"}, "limits": {"rpm": 3}},
            {"name": "beta", "key": "${BETA}", "metadata": {"team": "ads"}},
        ],
        "admin": {"key": "${ADMIN}"},
        "request_log": {"url": url, "flush_interval_s": 0.05, **request_log},
    }


def sqlite_url(folder: Path) -> str:
    return f"sqlite:///{folder / 'requests.db'}"


def files_in(folder: Path, pattern: str = "*") -> list[Path]:
    return sorted(folder.glob(pattern))


def database_bytes(folder: Path) -> bytes:
    """Everything SQLite wrote under `folder`: the database, its WAL and shared memory."""
    return b"".join(path.read_bytes() for path in files_in(folder, "requests.db*"))


async def admin_get(http: ClientSession, gateway: TestServer, path: str, *, expect: int = 200, **params: Any) -> Any:
    async with http.get(gateway.make_url(path), params=params, headers=ADMIN) as answer:
        body = await (answer.json() if answer.content_type == "application/json" else answer.text())
        assert answer.status == expect, body
        return body


async def wait_for_records(
    http: ClientSession, gateway: TestServer, count: int, timeout_s: float = 30.0, **params: Any
) -> list[dict[str, Any]]:
    """The records matching `params`, once there are `count` of them (the writer batches every 50 ms;
    `timeout_s` bounds a hang, with room for a loaded machine)."""
    records: list[dict[str, Any]] = []
    for _ in range(int(timeout_s / 0.05)):
        records = (await admin_get(http, gateway, "/admin/requests", limit=500, **params))["data"]
        if len(records) >= count:
            return records
        await asyncio.sleep(0.05)
    raise AssertionError(f"{len(records)} records, not {count}: {records}")


async def record_of(http: ClientSession, gateway: TestServer, request_id: str) -> dict[str, Any]:
    [record] = await wait_for_records(http, gateway, 1, request_id=request_id)
    found: dict[str, Any] = await admin_get(http, gateway, f"/admin/requests/{request_id}")
    assert found == record
    return found
