"""The `request_log:` section of config.yaml: where every API request's record is stored, for how
long, and how the writer batches them.

A leaf module (only pydantic): `gateway.config.settings` embeds it, `gateway.requestlog` reads it.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

SQLITE_SCHEME = "sqlite:///"
POSTGRES_SCHEMES = ("postgresql://", "postgres://")
# The default file, beside the config file the gateway was started with.
DEFAULT_SQLITE_FILE = "requests.db"


class RequestLogConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    # `sqlite:///PATH` (relative: to the config file's folder; `sqlite:////abs/path`) or
    # `postgresql://…` (credentials only as ${ENV_VAR}). Empty: `requests.db` beside the config
    # file; for a config not read from a file (an app built in a test), no log.
    url: SecretStr = SecretStr("")
    retention_days: Annotated[int, Field(ge=1, le=3660)] = 30
    # Records waiting for the writer (each worker): past it, a record is dropped and counted, never waited for.
    queue_size: Annotated[int, Field(ge=10, le=1_000_000)] = 10_000
    batch_size: Annotated[int, Field(ge=1, le=10_000)] = 500  # records per insert
    flush_interval_s: Annotated[float, Field(gt=0, le=60)] = 1.0  # the longest a record waits for a fuller batch
    team_field: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")] = "team"  # the metadata field of `team`
    # Off by default. On: the prompt and the (non-streamed) answer, PII redacted, cut at max_body_chars.
    include_bodies: bool = False
    max_body_chars: Annotated[int, Field(ge=16, le=100_000)] = 2000

    @field_validator("url")
    @classmethod
    def _known_scheme(cls, url: SecretStr) -> SecretStr:
        value = url.get_secret_value()
        if value and not value.startswith((SQLITE_SCHEME, *POSTGRES_SCHEMES)):
            raise ValueError(
                "must be sqlite:///PATH (e.g. sqlite:///requests.db, beside the config file) or "
                "postgresql://USER@HOST:PORT/DATABASE (as ${ENV_VAR} when it holds a password)"
            )
        if value == SQLITE_SCHEME:
            raise ValueError("sqlite:/// needs a file's path after it (e.g. sqlite:///requests.db)")
        return url


def url_password_literal(url: str) -> bool:
    """A PostgreSQL URL that carries a password (`user:secret@host`): it must come from the environment."""
    if not url.startswith(POSTGRES_SCHEMES):
        return False
    address = url.split("://", 1)[1].split("/", 1)[0]
    credentials, at, _ = address.rpartition("@")
    return bool(at) and ":" in credentials
