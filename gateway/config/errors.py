"""Why the gateway cannot start or a command cannot run: each error's message is the one line
shown to the user and its `status` the exit status (`gateway.cli` reports them, no traceback).
Raised from whichever layer finds the problem: a port that cannot be bound, Redis unreachable,
command-line values the models refuse."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pydantic import ValidationError
from redis.exceptions import AuthenticationError as RedisAuthenticationError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from gateway.config.settings import NAME_PATTERN, NAME_RULE
from policies.redis_sentinel import SentinelAuthenticationError

USAGE_ERROR = 2  # argparse's exit status for a command line it cannot use


class CommandError(Exception):
    """An everyday mistake: its message is the line shown to the user, and `status` the exit status."""

    status = 1


class UsageError(CommandError):
    """The command line itself is wrong (exit status 2, as argparse's own usage errors)."""

    status = USAGE_ERROR


class InvalidArguments(UsageError):
    """Command-line values the models refuse: each error is shown as `--flag: message`.
    `flags` maps a field's dotted path (`limits.rpm`) to the option that sets it (`--rpm`)."""

    def __init__(self, error: ValidationError, flags: Mapping[str, str]) -> None:
        super().__init__(str(error))
        self.error = error
        self.flags = flags

    def lines(self) -> list[str]:
        return validation_lines(self.error, self.flags)


class ListenError(CommandError):
    """The gateway cannot bind its address: the port is taken, privileged, or the host is not ours."""

    def __init__(self, host: str, port: int, error: OSError, *, port_option: str = "--port") -> None:
        shown = f"[{host}]" if ":" in host else host
        super().__init__(f"cannot listen on {shown}:{port}: {_listen_reason(error, port_option)}")


class RedisUnreachable(CommandError):
    def __init__(self, url: str, error: BaseException) -> None:
        shown = redacted_url(url)
        if isinstance(error, SentinelAuthenticationError):  # names the Sentinels and the settings to fix
            why = str(error)
        elif isinstance(error, RedisAuthenticationError):
            why = f"Redis at {shown} refused the credentials ({error}): check the user and password in the URL"
        else:
            why = (
                f"cannot reach Redis at {shown}: {_connection_reason(error)} "
                "(is Redis running? check --redis-url, or redis.url in the config file)"
            )
        super().__init__(why)


def validation_lines(error: ValidationError, flags: Mapping[str, str]) -> list[str]:
    """`--flag: message (got value)`, one line per error, the field named as the option that sets it."""
    lines = []
    for item in error.errors():
        path = ".".join(str(part) for part in item["loc"] if not isinstance(part, int))
        flag = next((flags[p] for p in _prefixes(path) if p in flags), path or "(arguments)")
        message = _friendly(item)
        value = item.get("input")
        shown = isinstance(value, (str, int, float)) and not isinstance(value, bool) and "api_key" not in path
        if shown and repr(value) not in message:
            message += f" (got {value!r})"
        lines.append(f"{flag}: {message}")
    return lines


def _prefixes(path: str) -> list[str]:
    parts = path.split(".")
    return [".".join(parts[:end]) for end in range(len(parts), 0, -1)]


_BOUNDS = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=", "less_than": "<"}


def _friendly(item: Any) -> str:
    kind, ctx = item["type"], item.get("ctx") or {}
    if kind in _BOUNDS:
        bound = next(iter(ctx.values()), "?")
        return f"must be {_BOUNDS[kind]} {bound}"
    if kind == "string_pattern_mismatch":
        pattern = ctx.get("pattern", "")
        return NAME_RULE if pattern == NAME_PATTERN else f"must match {pattern}"
    if kind == "string_too_short":
        return f"must have at least {ctx.get('min_length')} character(s)"
    if kind == "string_too_long":
        return f"must have at most {ctx.get('max_length')} characters"
    message: str = item["msg"].removeprefix("Value error, ")
    return message[:1].lower() + message[1:]


def redacted_url(url: str) -> str:
    """The URL without its password (Redis URLs may carry one)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if parts.password is None:
        return url
    netloc = f"{parts.username or ''}:***@{parts.hostname or ''}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def _connection_reason(error: BaseException) -> str:
    if isinstance(error, (RedisTimeoutError, TimeoutError)):
        return "timed out"
    cause: BaseException | None = error
    while cause is not None:  # the socket error under redis-py's own
        if isinstance(cause, OSError) and cause.errno:
            return os.strerror(cause.errno).lower()
        cause = cause.__cause__ or cause.__context__
    if isinstance(error, RedisConnectionError):
        return str(error) or "connection failed"
    return str(error)


def _listen_reason(error: OSError, port_option: str) -> str:
    import errno
    import socket

    if isinstance(error, socket.gaierror):
        return "unknown host (check --host or server.host)"
    reasons = {
        errno.EADDRINUSE: f"address already in use (another gateway running? pick another {port_option})",
        errno.EACCES: f"permission denied (ports below 1024 need privileges; pick another {port_option})",
        errno.EADDRNOTAVAIL: "the address is not one of this machine's (check --host or server.host)",
    }
    return reasons.get(error.errno or 0) or (error.strerror or str(error)).lower()
