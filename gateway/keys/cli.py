"""`gateway keys …`: manage keys and virtual keys in Redis directly, no running gateway needed.

Redis comes from the config file's `redis:` section (or --redis-url / --prefix). A new key's value
is printed once on stdout, alone on its line, so a script can capture it; everything else goes
to stderr. Credentials are read from stdin, never from the command line (where `ps` shows them).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import redis.asyncio as aioredis
from pydantic import ValidationError

from gateway.config_loader import ConfigError, load_config
from gateway.errors import GatewayError
from gateway.keys.directory import KeyDirectory
from gateway.keys.records import KeyRecord, records_from_config
from gateway.keys.store import RedisKeyStore
from gateway.keys.vault import Vault, generate_encryption_key
from gateway.keys.virtual_store import RedisVirtualKeyStore
from policies.limits.factory import redis_limits

Subparsers = argparse._SubParsersAction  # argparse names no public type for it


def register(commands: Subparsers[argparse.ArgumentParser]) -> None:
    keys = commands.add_parser("keys", help="create, list, rotate and revoke API keys and virtual keys")
    keys.add_argument("--redis-url", help="default: redis.url of the config file")
    keys.add_argument("--prefix", help="default: redis.prefix of the config file")
    actions = keys.add_subparsers(dest="keys_command", required=True)
    create = actions.add_parser("create", help="a new key; its value is printed once")
    create.add_argument("name")
    create.add_argument("--deployments", default="*", help="comma-separated names, tag:NAME or * (default)")
    create.add_argument("--virtual-keys", default="", help="comma-separated virtual key names the key may use")
    for limit in ("rpm", "tpm", "concurrent"):
        create.add_argument(f"--{limit}", type=int)
    create.add_argument("--budget-tokens", type=int)
    create.add_argument("--budget-usd", type=float)
    create.add_argument("--period", default="30d", help="budget period, e.g. 30d, 1d, 1h")
    create.add_argument("--expires", help="ISO 8601 date and time")
    create.add_argument("--cache-namespace")
    create.add_argument("--metadata", action="append", default=[], metavar="KEY=VALUE")
    actions.add_parser("list", help="every key, without values or hashes")
    for action in ("show", "rotate", "revoke", "usage"):
        actions.add_parser(action).add_argument("name")
    virtual = actions.add_parser("add-virtual", help="store a provider credential (read from stdin), encrypted")
    virtual.add_argument("name")
    virtual.add_argument("--provider", required=True)
    actions.add_parser("revoke-virtual").add_argument("name")
    actions.add_parser("reencrypt", help="rewrite stored credentials under the newest encryption key")
    actions.add_parser("encryption-key", help="print a new key for GATEWAY_ENCRYPTION_KEY")


def run(args: argparse.Namespace) -> int:
    if args.keys_command == "encryption-key":
        print(generate_encryption_key())
        return 0
    try:
        return asyncio.run(_run(args))
    except (GatewayError, ConfigError, ValidationError, ValueError) as exc:
        report = exc.report() if isinstance(exc, ConfigError) else getattr(exc, "message", str(exc))
        print(f"error: {report}", file=sys.stderr)
        return 1


def main(argv: list[str] | None = None) -> int:
    """`gateway keys …` on its own (what `gateway.cli` runs once it registers the command)."""
    parser = argparse.ArgumentParser(prog="gateway")
    parser.add_argument("-c", "--config", default=os.environ.get("GATEWAY_CONFIG", "config.yaml"))
    register(parser.add_subparsers(dest="command", required=True))
    return run(parser.parse_args(argv))


async def _run(args: argparse.Namespace) -> int:
    configured, url, prefix = _redis_settings(args)
    if not url:
        raise ValueError("no Redis: set redis.url in the config file or pass --redis-url")
    client = aioredis.from_url(url)
    try:
        keys = KeyDirectory(records_from_config(configured), RedisKeyStore(client, prefix, cache_ttl_s=0))
        virtual = RedisVirtualKeyStore(client, prefix, Vault.from_env(os.environ))
        return await _dispatch(args, _Context(keys, virtual, client, prefix))
    finally:
        await client.aclose()


def _redis_settings(args: argparse.Namespace) -> tuple[list[Any], str, str]:
    path = getattr(args, "config", None)
    if path and (os.path.exists(path) or not args.redis_url):
        loaded = load_config(path)
        redis = loaded.config.redis
        return list(loaded.client_keys), args.redis_url or redis.url, args.prefix or redis.prefix
    return [], args.redis_url, args.prefix or "gateway:"


@dataclass(frozen=True, slots=True)
class _Context:
    keys: KeyDirectory
    virtual: RedisVirtualKeyStore
    client: aioredis.Redis
    prefix: str


async def _dispatch(args: argparse.Namespace, context: _Context) -> int:
    handler = _KEY_COMMANDS.get(args.keys_command)
    if handler is None:
        return await _virtual(args.keys_command, args, context.virtual)
    return await handler(args, context)


async def _create(args: argparse.Namespace, context: _Context) -> int:
    value, record = await context.keys.create(args.name, _policy(args))
    _announce(record, "created; its value, below, is shown only this once")
    print(value)
    return 0


async def _rotate(args: argparse.Namespace, context: _Context) -> int:
    rotated = await context.keys.rotate(args.name)
    if rotated is None:
        return _missing("key", args.name)
    _announce(rotated[1], "rotated: the old value no longer works; the new one, below, is shown only this once")
    print(rotated[0])
    return 0


async def _revoke(args: argparse.Namespace, context: _Context) -> int:
    revoked = await context.keys.revoke(args.name)
    return _missing("key", args.name) if revoked is None else _announce(revoked, "revoked")


async def _list(args: argparse.Namespace, context: _Context) -> int:
    for record in await context.keys.list():
        print(_describe(record))
    return 0


async def _show(args: argparse.Namespace, context: _Context) -> int:
    record = await context.keys.get(args.name)
    if record is None:
        return _missing("key", args.name)
    print(_describe(record))
    return 0


async def _usage(args: argparse.Namespace, context: _Context) -> int:
    record = await context.keys.get(args.name)
    if record is None:
        return _missing("key", args.name)
    usage = await redis_limits(context.client, context.prefix).usage(record.name, record.budget)
    print(f"{record.name}: {usage.spend.tokens} tokens, ${usage.spend.cost_usd:.6f} this {usage.period} period")
    return 0


_KEY_COMMANDS: dict[str, Callable[[argparse.Namespace, _Context], Awaitable[int]]] = {
    "create": _create,
    "rotate": _rotate,
    "revoke": _revoke,
    "list": _list,
    "show": _show,
    "usage": _usage,
}


async def _virtual(command: str, args: argparse.Namespace, store: RedisVirtualKeyStore) -> int:
    if command == "add-virtual":
        value = sys.stdin.readline().strip()
        if not value:
            raise ValueError("pipe the credential on stdin, e.g. printenv OPENAI_API_KEY | gateway keys add-virtual …")
        if await store.create(args.name, args.provider, value) is None:
            raise ValueError(f"a virtual key named {args.name!r} exists already")
        print(f"virtual key {args.name!r} stored, encrypted", file=sys.stderr)
    elif command == "revoke-virtual":
        if await store.revoke(args.name) is None:
            return _missing("virtual key", args.name)
        print(f"virtual key {args.name!r} revoked; its value is deleted", file=sys.stderr)
    else:
        print(f"{await store.reencrypt()} credential(s) re-encrypted", file=sys.stderr)
    return 0


def _policy(args: argparse.Namespace) -> dict[str, Any]:
    budget = {"tokens": args.budget_tokens, "cost_usd": args.budget_usd, "period": args.period}
    limited = args.budget_tokens is not None or args.budget_usd is not None
    return {
        "deployments": _split(args.deployments),
        "virtual_keys": _split(args.virtual_keys),
        "limits": {"rpm": args.rpm, "tpm": args.tpm, "concurrent": args.concurrent},
        "budget": budget if limited else None,
        "expires_at": datetime.fromisoformat(args.expires) if args.expires else None,
        "metadata": dict(item.split("=", 1) for item in args.metadata if "=" in item),
        "cache_namespace": args.cache_namespace,
    }


def _split(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def _describe(record: KeyRecord) -> str:
    state = "revoked" if record.revoked else f"expires {record.expires_at.isoformat()}" if record.expires_at else "ok"
    return f"{record.name}\t{record.source}\t{','.join(record.deployments)}\t{state}"


def _announce(record: KeyRecord, what: str) -> int:
    print(f"key {record.name!r} {what}", file=sys.stderr)
    return 0


def _missing(what: str, name: str) -> int:
    print(f"error: no {what} named {name!r} in Redis", file=sys.stderr)
    return 1
