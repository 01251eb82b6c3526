"""`gateway keys …`: manage keys and virtual keys in Redis directly, no running gateway needed.

Redis comes from the config file's `redis:` section (-c FILE, before or after `keys`) or from
--redis-url / --prefix. A new key's value is printed once on stdout, alone on its line, so a script
can capture it; everything else goes to stderr. Credentials are read from stdin, never from the
command line (where `ps` shows them). Arguments are checked before Redis is reached; mistakes are
raised for `gateway.cli` to report in one line (exit status 2 for the command line's, else 1).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NoReturn

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from gateway.config.errors import CommandError, InvalidArguments, RedisUnreachable, UsageError
from gateway.config.loader import load_config, unknown_provider_type
from gateway.config.settings import Name, redis_url_problem
from gateway.keys.directory import KeyDirectory
from gateway.keys.records import KeyRecord, records_from_config, utcnow
from gateway.keys.requests import KeyCreate
from gateway.keys.store import RedisKeyStore
from gateway.keys.vault import ENCRYPTION_KEY_VARIABLE, Vault, generate_encryption_key
from gateway.keys.virtual_store import RedisVirtualKeyStore
from policies.limits.factory import redis_limits
from policies.redis_pool import RedisClient, RedisTarget, bounded_client

Subparsers = argparse._SubParsersAction  # argparse names no public type for it

_CONNECT_TIMEOUT_S = 5.0
_NAME_HELP = "the key's name: letters, digits and . _ : / @ -, starting with a letter or digit"
# The option that sets each field of a new key, to name it when the field's value is refused.
_CREATE_FLAGS = {
    "name": "NAME",
    "deployments": "--deployments",
    "virtual_keys": "--virtual-keys",
    "limits.rpm": "--rpm",
    "limits.tpm": "--tpm",
    "limits.concurrent": "--concurrent",
    "budget.tokens": "--budget-tokens",
    "budget.cost_usd": "--budget-usd",
    "budget.period": "--period",
    "budget.timezone": "--timezone",
    "expires_at": "--expires",
    "metadata": "--metadata",
    "cache_namespace": "--cache-namespace",
}
_LIMIT_HELP = {
    "rpm": "requests per minute (a whole number >= 1; default: unlimited)",
    "tpm": "tokens per minute, prompt and completion (>= 1; default: unlimited)",
    "concurrent": "requests in flight at once (>= 1; default: unlimited)",
}


def register(commands: Subparsers[Any]) -> None:
    # Where Redis is may be given after `keys` or after the action too: gateway keys list -c FILE.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-c",
        "--config",
        metavar="FILE",
        default=argparse.SUPPRESS,
        help="config file whose redis: section (and keys:) to use (default: $GATEWAY_CONFIG or config.yaml)",
    )
    common.add_argument(
        "--redis-url",
        metavar="URL",
        default=argparse.SUPPRESS,
        help="e.g. redis://127.0.0.1:6379/0 (default: the config's redis.url)",
    )
    common.add_argument("--prefix", default=argparse.SUPPRESS, help="prefix of the Redis keys (default: redis.prefix)")
    keys = commands.add_parser(
        "keys",
        parents=[common],
        help="create, list, rotate and revoke API keys and virtual keys (in Redis)",
        description="Manage API keys and virtual keys in Redis directly; no running gateway is needed. "
        "A new key's value is printed once on stdout; everything else goes to stderr.",
    )
    actions = keys.add_subparsers(dest="keys_command", metavar="ACTION", title="actions", required=True)

    def action(name: str, text: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = actions.add_parser(
            name, parents=[common], help=text, description=text[:1].upper() + text[1:] + "."
        )
        return parser

    create = action("create", "create a key in Redis; its value is printed once, on stdout")
    create.add_argument("name", metavar="NAME", help=_NAME_HELP)
    create.add_argument(
        "--deployments", default="*", help="comma-separated deployment names, tag:NAME, or * for all (default: *)"
    )
    create.add_argument(
        "--virtual-keys", default="", help="comma-separated virtual key names the key may use (default: none)"
    )
    for limit, text in _LIMIT_HELP.items():
        create.add_argument(f"--{limit}", type=int, metavar="N", help=text)
    create.add_argument("--budget-tokens", type=int, metavar="N", help="tokens allowed per budget period (>= 1)")
    create.add_argument("--budget-usd", type=float, metavar="X", help="US dollars allowed per budget period (> 0)")
    create.add_argument(
        "--period",
        help="budget period: a number and s, m, h, d or w, e.g. 30d, 1h (fixed windows), or day, week or month "
        "(calendar periods from local midnight in --timezone) (default: 30d)",
    )
    create.add_argument(
        "--timezone", metavar="ZONE", help="IANA time zone of a calendar --period, e.g. Europe/Paris (default: UTC)"
    )
    create.add_argument(
        "--expires", type=_iso_datetime, metavar="WHEN", help="ISO 8601 date, or date and time (UTC without a zone)"
    )
    create.add_argument("--cache-namespace", metavar="NAME", help="a partition of this key's own cache entries")
    create.add_argument(
        "--metadata", type=_key_value, action="append", default=[], metavar="KEY=VALUE", help="free text; repeatable"
    )
    action("list", "list every key (config file's and Redis's), without values or hashes")
    for name, text in (
        ("show", "show one key (no value, no hash)"),
        ("rotate", "give a Redis key a new value, printed once; the old one stops working at once"),
        ("revoke", "revoke a Redis key: it is refused from now on"),
        ("usage", "show a key's spend (tokens, US dollars) in its current budget period"),
    ):
        action(name, text).add_argument("name", metavar="NAME", help="the key's name")
    virtual = action("add-virtual", "store a provider credential, read from stdin, encrypted (GATEWAY_ENCRYPTION_KEY)")
    virtual.add_argument("name", metavar="NAME", help="the virtual key's name, as clients send it")
    virtual.add_argument(
        "--provider", required=True, help="the provider type it is for: a deployments[].provider.type, e.g. openai"
    )
    action("revoke-virtual", "revoke a virtual key stored in Redis and delete its value").add_argument(
        "name", metavar="NAME", help="the virtual key's name"
    )
    action("reencrypt", "rewrite every stored credential under the newest GATEWAY_ENCRYPTION_KEY")
    action("encryption-key", "print a new key for GATEWAY_ENCRYPTION_KEY")


def _iso_datetime(text: str) -> datetime:
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not an ISO 8601 date: {text!r} (e.g. 2026-12-31 or 2026-12-31T18:00:00+02:00)"
        ) from None


def _key_value(text: str) -> tuple[str, str]:
    key, equals, value = text.partition("=")
    if not equals or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


class _VirtualArguments(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Name
    provider: str

    @field_validator("provider")
    @classmethod
    def _known(cls, provider: str) -> str:
        problem = unknown_provider_type(provider)
        if problem:
            raise ValueError(problem)
        return provider


def run(args: argparse.Namespace) -> int:
    """A parsed `gateway keys …` command; its errors are the `gateway` command's to report."""
    if args.keys_command == "encryption-key":
        print(generate_encryption_key())
        return 0
    _check_arguments(args)  # before Redis: a mistake is named whether Redis answers or not
    return asyncio.run(_run(args))


def _check_arguments(args: argparse.Namespace) -> None:
    if args.keys_command == "create" and not _budgeted(args):
        for given, flag in ((args.period, "--period"), (args.timezone, "--timezone")):
            if given is not None:
                raise UsageError(
                    f"{flag}: give it with --budget-tokens or --budget-usd (it is the budget's {flag[2:]})"
                )
    try:
        if args.keys_command == "create":
            args.policy = KeyCreate.model_validate({**_policy(args), "name": args.name}).policy()
        elif args.keys_command == "add-virtual":
            _VirtualArguments(name=args.name, provider=args.provider)
    except ValidationError as exc:
        flags = _CREATE_FLAGS if args.keys_command == "create" else {"name": "NAME", "provider": "--provider"}
        raise InvalidArguments(exc, flags) from None
    if args.keys_command in ("add-virtual", "reencrypt") and Vault.from_env(os.environ) is None:
        # Before stdin and Redis: nobody types a credential only to hear it cannot be stored.
        raise CommandError(
            f"{ENCRYPTION_KEY_VARIABLE} is not set: virtual keys are stored encrypted under it; "
            f"make one with `gateway keys encryption-key`, export it (the gateway needs the same one), and retry"
        )
    url = getattr(args, "redis_url", None)
    problem = redis_url_problem(url) if url else None
    if problem:
        raise UsageError(f"--redis-url: {problem}")


async def _run(args: argparse.Namespace) -> int:
    configured, disabled, target, prefix = _redis_settings(args)
    client = bounded_client(target, socket_connect_timeout=_CONNECT_TIMEOUT_S, socket_timeout=_CONNECT_TIMEOUT_S)
    try:
        try:
            await client.ping()
        except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
            raise RedisUnreachable(_shown(target), exc) from None
        keys = KeyDirectory(records_from_config(configured), RedisKeyStore(client, prefix, cache_ttl_s=0))
        virtual = RedisVirtualKeyStore(client, prefix, Vault.from_env(os.environ))
        return await _dispatch(args, _Context(keys, virtual, client, prefix, disabled))
    finally:
        await client.aclose()


def _shown(target: RedisTarget) -> str:
    if target.mode != "sentinel":
        return target.url
    nodes = ",".join(f"{host}:{port}" for host, port in target.sentinels)
    return f"redis+sentinel://{nodes}/{target.service_name}"


def _redis_settings(args: argparse.Namespace) -> tuple[list[Any], dict[str, str], RedisTarget, str]:
    """(the config file's keys, those of them disabled -> the unset variable, where Redis is, the
    prefix): options first, then the config file's.
    --redis-url replaces the config's redis.url and keeps its mode (a cluster node, Sentinel's credentials)."""
    path = getattr(args, "config", None)
    given_url, given_prefix = getattr(args, "redis_url", None), getattr(args, "prefix", None)
    if path and (os.path.exists(path) or not given_url):
        if not os.path.exists(path):
            raise CommandError(
                f"no Redis to talk to: the config file {path} does not exist; "
                "pass -c FILE (a config with redis.url) or --redis-url redis://HOST:6379/0"
            )
        loaded = load_config(path)
        redis = loaded.config.redis
        target = redis.target()
        if given_url:
            target = dataclasses.replace(target, url=given_url)
        if not target.configured:
            raise CommandError(f"no Redis to talk to: {path} sets no redis.url; set it, or pass --redis-url")
        return list(loaded.client_keys), loaded.disabled_keys, target, given_prefix or redis.prefix
    if not given_url:
        raise CommandError("no Redis to talk to: pass --redis-url redis://HOST:6379/0, or -c FILE with redis.url")
    return [], {}, RedisTarget(url=given_url), given_prefix or "gateway:"


@dataclass(frozen=True, slots=True)
class _Context:
    keys: KeyDirectory
    virtual: RedisVirtualKeyStore
    client: RedisClient
    prefix: str
    disabled: dict[str, str]  # config keys whose variable is unset -> that variable


async def _dispatch(args: argparse.Namespace, context: _Context) -> int:
    handler = _KEY_COMMANDS.get(args.keys_command)
    if handler is None:
        return await _virtual(args.keys_command, args, context.virtual)
    return await handler(args, context)


async def _create(args: argparse.Namespace, context: _Context) -> int:
    value, record = await context.keys.create(args.name, args.policy)
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
    for name, variable in sorted(context.disabled.items()):  # a typo'd or unset variable is shown, not hidden
        print(f"{name}\tconfig\t-\tdisabled ({variable} is not set)")
    return 0


async def _show(args: argparse.Namespace, context: _Context) -> int:
    """What GET /admin/keys/NAME shows (limits, budget, metadata, expiry, status), as JSON."""
    record = await context.keys.get(args.name)
    if record is None:
        variable = context.disabled.get(args.name)
        if variable is None:
            return _missing("key", args.name)
        shown: dict[str, Any] = {"name": args.name, "source": "config", "status": "disabled", "unset": variable}
    else:
        shown = record.public()
    print(json.dumps(shown, indent=2, ensure_ascii=False))
    return 0


async def _usage(args: argparse.Namespace, context: _Context) -> int:
    record = await context.keys.get(args.name)
    if record is None:
        return _missing("key", args.name)
    usage = await redis_limits(context.client, context.prefix).usage(record.name, record.budget)
    print(f"{record.name}: {usage.spend.tokens} tokens, ${usage.spend.cost_usd:.6f} this {usage.budget.label} period")
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
            raise CommandError(
                "no credential on stdin: pipe it in, e.g. printenv OPENAI_API_KEY | gateway keys add-virtual NAME "
                "--provider openai"
            )
        if await store.create(args.name, args.provider, value) is None:
            raise CommandError(f"a virtual key named {args.name!r} exists already")
        print(f"virtual key {args.name!r} stored, encrypted", file=sys.stderr)
    elif command == "revoke-virtual":
        if await store.revoke(args.name) is None:
            return _missing("virtual key", args.name)
        print(f"virtual key {args.name!r} revoked; its value is deleted", file=sys.stderr)
    else:
        print(f"{await store.reencrypt()} credential(s) re-encrypted", file=sys.stderr)
    return 0


def _policy(args: argparse.Namespace) -> dict[str, Any]:
    """The new key's fields from the options, unchecked (KeyCreate checks them)."""
    budget = {"tokens": args.budget_tokens, "cost_usd": args.budget_usd, "period": args.period or "30d"}
    if args.timezone is not None:
        budget["timezone"] = args.timezone
    return {
        "deployments": _split(args.deployments),
        "virtual_keys": _split(args.virtual_keys),
        "limits": {"rpm": args.rpm, "tpm": args.tpm, "concurrent": args.concurrent},
        "budget": budget if _budgeted(args) else None,
        "expires_at": args.expires,
        "metadata": dict(args.metadata),
        "cache_namespace": args.cache_namespace,
    }


def _budgeted(args: argparse.Namespace) -> bool:
    return args.budget_tokens is not None or args.budget_usd is not None


def _split(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def _describe(record: KeyRecord) -> str:
    status = record.status(utcnow())
    if status == "active" and record.expires_at is not None:
        state = f"expires {record.expires_at.isoformat()}"
    else:
        state = "ok" if status == "active" else status
    return f"{record.name}\t{record.source}\t{','.join(record.deployments)}\t{state}"


def _announce(record: KeyRecord, what: str) -> int:
    print(f"key {record.name!r} {what}", file=sys.stderr)
    return 0


def _missing(what: str, name: str) -> NoReturn:
    raise CommandError(f"no {what} named {name!r}")
