"""The store a `request_log.url` names: `sqlite:///PATH` (relative to the config file's folder,
`sqlite:////abs/path` absolute) or `postgresql://…`; empty: `requests.db` beside the config file,
and no store at all for a config that was not read from a file (an app built in a test leaves no
file behind)."""

from __future__ import annotations

from pathlib import Path

from gateway.config.request_log import RequestLogConfig, target
from gateway.requestlog.stores.base import RecordStore
from gateway.requestlog.stores.postgres import PostgresStore
from gateway.requestlog.stores.sqlite import SqliteStore


def store_for(config: RequestLogConfig, config_path: str | Path | None) -> RecordStore | None:
    """None: the log is off, or has nowhere to write."""
    kind, path = target(config, config_path)
    if kind == "postgresql":
        return PostgresStore(config.url.get_secret_value())
    return SqliteStore(path) if path is not None else None
