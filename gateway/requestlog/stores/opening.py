"""The store a `request_log.url` names: `sqlite:///PATH` (relative to the config file's folder,
`sqlite:////abs/path` absolute) or `postgresql://…`; empty: `requests.db` beside the config file,
and no store at all for a config that was not read from a file (an app built in a test leaves no
file behind)."""

from __future__ import annotations

from pathlib import Path

from gateway.config.request_log import DEFAULT_SQLITE_FILE, POSTGRES_SCHEMES, SQLITE_SCHEME
from gateway.requestlog.stores.base import RecordStore
from gateway.requestlog.stores.postgres import PostgresStore
from gateway.requestlog.stores.sqlite import SqliteStore


def store_for(url: str, config_path: str | Path | None) -> RecordStore | None:
    """None: nowhere to write (no URL and no config file)."""
    folder = Path(config_path).resolve().parent if config_path is not None else Path.cwd()
    if not url:
        return SqliteStore(folder / DEFAULT_SQLITE_FILE) if config_path is not None else None
    if url.startswith(POSTGRES_SCHEMES):
        return PostgresStore(url)
    assert url.startswith(SQLITE_SCHEME)  # RequestLogConfig checked the scheme
    return SqliteStore(folder / url.removeprefix(SQLITE_SCHEME))
