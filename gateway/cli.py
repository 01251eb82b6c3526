"""The `gateway` command: `gateway serve` runs the gateway, `gateway check-config [PATH]` checks a file,
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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from pydantic import ValidationError
from redis.exceptions import RedisError

from gateway import __version__
from gateway.api.errors import GatewayError
from gateway.config.errors import (
    USAGE_ERROR,
    CommandError,
    InvalidArguments,
    UsageError,
    validation_lines,
)
from gateway.config.loader import ConfigError, LoadedConfig, load_config, parse_config
from gateway.config.policies import PolicyConfig
from gateway.config.request_log import shown, target
from gateway.config.settings import DeploymentConfig, ServerConfig
from gateway.config.starter import PROVIDERS, Starter, render
from gateway.keys.vault import EncryptionKeyInvalid, Vault
from gateway.observability.multiprocess import share_between_workers, worker_exited
from policies.guardrails.guards import INTENT_CHECKS

DEFAULT_CONFIG = os.environ.get("GATEWAY_CONFIG", "config.yaml")
PROG = "gateway"


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
        return _check_config(args.path or args.config)
    if args.command == "init":
        return _init(args)
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


class _Parser(argparse.ArgumentParser):
    """argparse's, but a usage error is one line (with where to find help), not the whole usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE_ERROR, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    from gateway.keys import cli as keys_cli

    parser = _Parser(prog=PROG, description="An LLM gateway for the OpenAI Completions and Chat Completions APIs.")
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
    check.add_argument(
        "path",
        nargs="?",
        help="the config file, e.g. config.yaml (default: -c FILE, given before or after check-config; "
        "else $GATEWAY_CONFIG or config.yaml)",
    )
    check.add_argument("-c", "--config", metavar="FILE", default=argparse.SUPPRESS, help="the config file")
    _init_options(
        commands.add_parser(
            "init",
            help="write a starter config file (asking, or from flags)",
            description="Write a starter config for one upstream that check-config accepts: asks on a terminal "
            "for what no flag gives, else takes the defaults (the built-in mock).",
        )
    )
    keys_cli.register(commands)
    return parser


def _init_options(init: argparse.ArgumentParser) -> None:
    init.add_argument("path", nargs="?", default="config.yaml", help="where to write it (default: config.yaml)")
    init.add_argument("--provider", choices=list(PROVIDERS), help="the upstream (default: mock, needs nothing)")
    init.add_argument("--name", help="the deployment's name, what clients send as `model` (default: the provider's)")
    init.add_argument("--base-url", help="the upstream's URL (default: the provider's)")
    init.add_argument("--model", help="the upstream's model name (default: the provider's)")
    init.add_argument("--api-key-env", metavar="VAR", help="the variable holding the upstream's key")
    init.add_argument("--port", type=int, default=8080, help="the gateway's port (default: 8080)")
    init.add_argument(
        "--no-keys", action="store_true", help="no client or admin key: every caller is accepted (local trials only)"
    )
    init.add_argument("--force", action="store_true", help="replace an existing file")


def _init(args: argparse.Namespace) -> int:
    path = Path(args.path)
    if path.exists() and not args.force:
        raise CommandError(f"{path} exists: pass --force to replace it, or another path")
    given = {"provider": args.provider, "name": args.name, "base_url": args.base_url, "model": args.model}
    given["api_key_env"] = args.api_key_env
    if args.provider is None and sys.stdin.isatty():
        given = _ask(given)
    starter = Starter(
        **{field: value for field, value in given.items() if value}, port=args.port, keys=not args.no_keys
    )
    problems = starter.problems()
    if problems:
        raise UsageError("; ".join(problems))
    text = render(starter)
    parse_config(text, {}, source=str(path))  # what it writes, check-config accepts (raises otherwise)
    path.write_text(text)
    print(f"wrote {path}: check it with `gateway check-config {path}`, run it with `gateway serve -c {path}`")
    return 0


def _ask(given: dict[str, str | None]) -> dict[str, str | None]:
    """On a terminal: each setting no flag gave, with its default in brackets."""
    answers = dict(given)
    provider = input(f"provider ({', '.join(PROVIDERS)}) [mock]: ").strip() or "mock"
    answers["provider"] = provider
    if provider in PROVIDERS and provider != "mock":
        _, url, model, variable = PROVIDERS[provider]
        for field, question, default in (
            ("base_url", "upstream URL", url),
            ("model", "upstream model", model),
            ("api_key_env", "variable holding its key", variable),
        ):
            if not answers.get(field):
                answers[field] = input(f"{question} [{default}]: ").strip() or default
    return answers


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
    parser.add_argument(
        "--port",
        type=int,
        default=default(None),
        help="override server.port (0: any free port; default: $GATEWAY_PORT)",
    )
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
        priced = f", price from {resolved.price_source}" if resolved.price_source else ""
        print(f"  deployment {name}{shown}: provider {config.provider.type}{priced}, {state}")
    for name, policy in loaded.config.policies.items():
        if policy.input or policy.output:
            print(f"  policy {name}: {_guardrails_summary(policy)}")
    print(f"  API keys: {len(loaded.client_keys)} active")
    print(f"  request log: {_request_log_summary(loaded, path)}")
    for warning in loaded.warnings:
        print(f"  warning: {warning}")
    return 0


def _request_log_summary(loaded: LoadedConfig, path: str) -> str:
    settings = loaded.config.request_log
    kind, file = target(settings, path)
    if not kind:
        return "off"
    where = f"SQLite file {file}" if file is not None else shown(settings.url.get_secret_value())
    return f"{where}, records kept {settings.retention_days} days"


def _guardrails_summary(policy: PolicyConfig) -> str:
    """Its checks, and which messages of a chat its intent checks judge."""
    parts = [
        f"{stage} {', '.join(c.label for c in checks)}"
        for stage, checks in (("input", policy.input), ("output", policy.output))
        if checks
    ]
    intent = [check.label for check in policy.input if check.check in INTENT_CHECKS]
    if intent and policy.trust_leading_instructions:
        parts.append(f"leading system/developer messages skip {', '.join(intent)} (trust_leading_instructions: true)")
    elif intent:
        parts.append("every message judged by every check (trust_leading_instructions: false)")
    return "; ".join(parts)


def _server_settings(args: argparse.Namespace, loaded: LoadedConfig) -> ServerConfig:
    """server: with the command line's overrides, held to the same bounds as the config file's."""
    port = (
        args.port if args.port is not None else os.environ.get("GATEWAY_PORT") or None
    )  # the image's health check reads it too
    overrides = {"host": args.host, "port": port, "workers": args.workers}
    given = {field: value for field, value in overrides.items() if value is not None}
    try:
        return ServerConfig.model_validate({**loaded.config.server.model_dump(), **given})
    except ValidationError as exc:
        raise InvalidArguments(exc, {"host": "--host", "port": "--port", "workers": "--workers"}) from None


def _serve(args: argparse.Namespace) -> int:
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    loaded = load_config(args.config)
    server = _server_settings(args, loaded)
    if loaded.config.redis.enabled:
        Vault.from_env(os.environ)  # a malformed GATEWAY_ENCRYPTION_KEY is named now, not by each worker
    metrics = loaded.config.observability.metrics
    # Before the app (and prometheus_client) is imported: workers share their series through files.
    done = share_between_workers(metrics, server.workers)
    from gateway.app import create_app  # imported late: check-config needs no server stack
    from gateway.banner import banner
    from gateway.workers import serve_workers

    def announce() -> None:
        for line in banner(loaded, server, os.environ, args.config):
            logging.getLogger("gateway").info("%s", line)

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
            backlog=server.backlog,
            announce=announce,
        )
    finally:
        done()


if __name__ == "__main__":
    # `python -m gateway.cli`: run the module as imported, whose exception classes are the ones raised.
    from gateway import cli

    sys.exit(cli.main())
