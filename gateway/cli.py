"""The `gateway` command: `gateway serve` runs the gateway, `gateway check-config PATH` checks a file,
`gateway keys …` manages API keys and virtual keys in Redis."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from gateway import __version__
from gateway.config import DeploymentConfig
from gateway.config_loader import ConfigError, LoadedConfig, load_config
from gateway.keys import cli as keys_cli
from gateway.metrics_multiprocess import share_between_workers, worker_exited

DEFAULT_CONFIG = os.environ.get("GATEWAY_CONFIG", "config.yaml")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "check-config":
        return _check_config(args.path)
    if args.command == "keys":
        return keys_cli.run(args)
    return _serve(args)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gateway", description="An LLM gateway for the OpenAI Completions API.")
    parser.add_argument("--version", action="version", version=f"gateway {__version__}")
    commands = parser.add_subparsers(dest="command")
    _serve_options(parser, defaults=True)
    serve = commands.add_parser("serve", help="run the gateway (the default command)")
    # SUPPRESS: options given before `serve` (gateway -c FILE serve) are not reset by its defaults.
    _serve_options(serve, defaults=False)
    check = commands.add_parser("check-config", help="validate a config file and print what it defines")
    check.add_argument("path", help="the config file, e.g. config.yaml")
    keys_cli.register(commands)
    return parser


def _serve_options(parser: argparse.ArgumentParser, *, defaults: bool) -> None:
    def default(value: object) -> object:
        return value if defaults else argparse.SUPPRESS

    parser.add_argument(
        "-c", "--config", default=default(DEFAULT_CONFIG), help="config file (default: $GATEWAY_CONFIG or config.yaml)"
    )
    parser.add_argument("--host", default=default(None), help="override server.host")
    parser.add_argument("--port", type=int, default=default(None), help="override server.port")
    parser.add_argument(
        "--workers", type=int, default=default(None), help="override server.workers (processes sharing the port)"
    )
    parser.add_argument(
        "--log-level",
        type=str.upper,
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        default=default(os.environ.get("GATEWAY_LOG_LEVEL", "INFO").upper()),
    )


def _load_or_report(path: str) -> LoadedConfig | None:
    try:
        return load_config(path)
    except ConfigError as exc:
        print(exc.report(), file=sys.stderr)
        return None


def _routing_details(config: DeploymentConfig) -> list[tuple[str, list[str]]]:
    return [
        ("aliases", config.aliases),
        ("tags", config.tags),
        ("fallbacks", config.fallbacks),
        ("policies", config.policies),
    ]


def _check_config(path: str) -> int:
    loaded = _load_or_report(path)
    if loaded is None:
        return 1
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


def _serve(args: argparse.Namespace) -> int:
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    loaded = _load_or_report(args.config)
    if loaded is None:
        return 1
    server = loaded.config.server
    host = args.host or server.host
    port = args.port if args.port is not None else server.port
    workers = args.workers or server.workers
    # Before the app (and prometheus_client) is imported: workers share their series through files.
    done = share_between_workers(loaded.config.observability.metrics, workers)
    from gateway.app import create_app  # imported late: check-config needs no server stack
    from gateway.workers import serve_workers

    try:
        return serve_workers(
            lambda: create_app(loaded, config_path=args.config, host=host),
            host,
            port,
            workers,
            on_worker_exit=worker_exited,
        )
    finally:
        done()


if __name__ == "__main__":
    sys.exit(main())
