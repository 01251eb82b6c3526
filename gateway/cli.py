"""The `gateway` command: `gateway serve` runs the gateway, `gateway check-config PATH` checks a file,
`gateway keys …` manages API keys and virtual keys in Redis.

Everyday mistakes (a port in use, Redis unreachable, an invalid argument, a bad config file) end
in a line or two naming the problem and its fix, never a traceback: `explain` is the one place
that turns the exceptions they raise into those lines. Usage errors exit with 2, others with 1.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn
from urllib.parse import urlsplit, urlunsplit

from pydantic import ValidationError
from redis.exceptions import AuthenticationError as RedisAuthenticationError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from gateway import __version__
from gateway.api.errors import GatewayError
from gateway.config.loader import ConfigError, LoadedConfig, load_config
from gateway.config.settings import NAME_PATTERN, NAME_RULE, DeploymentConfig, ServerConfig
from gateway.keys.vault import EncryptionKeyInvalid, Vault
from gateway.observability.multiprocess import share_between_workers, worker_exited

DEFAULT_CONFIG = os.environ.get("GATEWAY_CONFIG", "config.yaml")
PROG = "gateway"
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
        if isinstance(error, RedisAuthenticationError):
            why = f"Redis at {shown} refused the credentials ({error}): check the user and password in the URL"
        else:
            why = (
                f"cannot reach Redis at {shown}: {_connection_reason(error)} "
                "(is Redis running? check --redis-url, or redis.url in the config file)"
            )
        super().__init__(why)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return _run(args)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # the known ones become a line; the others keep their traceback
        status = report(exc)
        if status is None:
            raise
        return status


def _run(args: argparse.Namespace) -> int:
    if args.command == "check-config":
        return _check_config(args.path)
    if args.command == "keys":
        from gateway.keys import cli as keys_cli

        return keys_cli.run(args)
    return _serve(args)


def report(exc: BaseException) -> int | None:
    """Print what `explain` makes of the exception on stderr; its exit status, or None if unknown."""
    explained = explain(exc)
    if explained is None:
        return None
    status, lines, prefixed = explained
    for line in lines:
        print(f"{PROG}: {line}" if prefixed else line, file=sys.stderr)
    sys.stderr.flush()
    return status


def report_or_trace(exc: BaseException) -> int:
    """For a worker process, which cannot re-raise: the line for a known mistake, else the traceback."""
    status = report(exc)
    if status is None:
        traceback.print_exception(exc)
        status = 1
    return status


def explain(exc: BaseException) -> tuple[int, list[str], bool] | None:
    """(exit status, the lines to show, whether each starts with `gateway: `) for a known mistake."""
    if isinstance(exc, InvalidArguments):
        return exc.status, exc.lines(), True
    if isinstance(exc, CommandError):
        return exc.status, [str(exc)], True
    if isinstance(exc, ConfigError):
        return 1, exc.report().splitlines(), False  # names the file, then one line per problem
    if isinstance(exc, GatewayError):  # a key store's refusal: exists already, read-only, no encryption key…
        return 1, [exc.message], True
    if isinstance(exc, EncryptionKeyInvalid):
        return 1, [f"{exc}; make one with `gateway keys encryption-key`"], True
    if isinstance(exc, RedisError):
        return 1, [f"Redis failed: {exc} (check --redis-url, or redis.url in the config file)"], True
    if isinstance(exc, ValidationError):
        return 1, validation_lines(exc, {}), True
    if isinstance(exc, OSError) and exc.filename:
        reason = (exc.strerror or str(exc)).lower()
        return 1, [f"cannot use {exc.filename}: {reason}"], True
    return None


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


class _Parser(argparse.ArgumentParser):
    """argparse's, but a usage error is one line (with where to find help), not the whole usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE_ERROR, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    from gateway.keys import cli as keys_cli

    parser = _Parser(prog=PROG, description="An LLM gateway for the OpenAI Completions API.")
    parser.add_argument("--version", action="version", version=f"gateway {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    _serve_options(parser, defaults=True)
    serve = commands.add_parser(
        "serve", help="run the gateway (the default command)", description="Run the gateway until SIGTERM or Ctrl-C."
    )
    # SUPPRESS: options given before `serve` (gateway -c FILE serve) are not reset by its defaults.
    _serve_options(serve, defaults=False)
    check = commands.add_parser(
        "check-config",
        help="validate a config file and print what it defines",
        description="Validate a config file: every problem on its own line (exit status 1), or what it defines.",
    )
    check.add_argument("path", help="the config file, e.g. config.yaml")
    keys_cli.register(commands)
    return parser


def _serve_options(parser: argparse.ArgumentParser, *, defaults: bool) -> None:
    def default(value: object) -> object:
        return value if defaults else argparse.SUPPRESS

    parser.add_argument(
        "-c",
        "--config",
        metavar="FILE",
        default=default(DEFAULT_CONFIG),
        help="config file (default: $GATEWAY_CONFIG or config.yaml)",
    )
    parser.add_argument("--host", default=default(None), help="override server.host")
    parser.add_argument("--port", type=int, default=default(None), help="override server.port (0: any free port)")
    parser.add_argument(
        "--workers", type=int, default=default(None), help="override server.workers (processes sharing the port)"
    )
    parser.add_argument(
        "--log-level",
        type=str.upper,
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        default=default(os.environ.get("GATEWAY_LOG_LEVEL", "INFO").upper()),
        help="DEBUG, INFO, WARNING or ERROR (default: $GATEWAY_LOG_LEVEL or INFO)",
    )


def _routing_details(config: DeploymentConfig) -> list[tuple[str, list[str]]]:
    return [
        ("aliases", config.aliases),
        ("tags", config.tags),
        ("fallbacks", config.fallbacks),
        ("policies", config.policies),
    ]


def _check_config(path: str) -> int:
    loaded = load_config(path)
    print(f"{path}: OK")
    for name, resolved in loaded.deployments.items():
        state = f"UNAVAILABLE: {resolved.unavailable}" if resolved.unavailable else "ok"
        config = resolved.config
        details = [f"{label}: {', '.join(values)}" for label, values in _routing_details(config) if values]
        shown = f" ({'; '.join(details)})" if details else ""
        print(f"  deployment {name}{shown}: provider {config.provider.type}, {state}")
    print(f"  API keys: {len(loaded.client_keys)} active")
    for warning in loaded.warnings:
        print(f"  warning: {warning}")
    return 0


def _server_settings(args: argparse.Namespace, loaded: LoadedConfig) -> ServerConfig:
    """server: with the command line's overrides, held to the same bounds as the config file's."""
    overrides = {"host": args.host, "port": args.port, "workers": args.workers}
    given = {field: value for field, value in overrides.items() if value is not None}
    try:
        return ServerConfig.model_validate({**loaded.config.server.model_dump(), **given})
    except ValidationError as exc:
        raise InvalidArguments(exc, {"host": "--host", "port": "--port", "workers": "--workers"}) from None


def _serve(args: argparse.Namespace) -> int:
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    loaded = load_config(args.config)
    server = _server_settings(args, loaded)
    if loaded.config.redis.url:
        Vault.from_env(os.environ)  # a malformed GATEWAY_ENCRYPTION_KEY is named now, not by each worker
    metrics = loaded.config.observability.metrics
    # Before the app (and prometheus_client) is imported: workers share their series through files.
    done = share_between_workers(metrics, server.workers)
    from gateway.app import create_app  # imported late: check-config needs no server stack
    from gateway.workers import serve_workers

    own_listener: Sequence[tuple[str, int]] = ()
    if metrics.enabled and metrics.port is not None:
        own_listener = [(metrics.host or server.host, metrics.port)]
    make_app: Callable[[], Any] = lambda: create_app(loaded, config_path=args.config, host=server.host)  # noqa: E731
    try:
        return serve_workers(
            make_app,
            server.host,
            server.port,
            server.workers,
            on_worker_exit=worker_exited,
            metrics_listener=own_listener,
            on_error=report_or_trace,
        )
    finally:
        done()


if __name__ == "__main__":
    # `python -m gateway.cli`: run the module as imported, whose exception classes are the ones raised.
    from gateway import cli

    sys.exit(cli.main())
