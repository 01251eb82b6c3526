"""The admin API, an aiohttp sub-application to mount at `/admin`: keys and virtual keys, created,
listed, shown, changed, rotated and revoked, each key's usage, spend, and the deployments' state.
Off unless an admin key is configured.

Every request must carry the admin key (`Authorization: Bearer …` or `x-gateway-admin-key`),
compared in constant time, a read-only viewer key (GET routes only), or a console session
(`gateway.keys.access`). A key too weak to guard it (under 32 characters, or repetitive) keeps the
API off. Failed attempts are logged with the client's address (never the value tried), counted
(`gateway_admin_auth_failures_total`) and throttled per address: after `ADMIN_FAILURES_PER_WINDOW`
in a minute, that address gets 429 `too_many_auth_failures` until the minute is over. No answer
carries a key's hash or a credential's value; a new key's value appears once, in the answer that
created (or rotated) it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import orjson
from aiohttp import web
from aiohttp.typedefs import Handler
from pydantic import BaseModel, SecretStr, ValidationError

from gateway.api.credentials import admin_key_weakness
from gateway.api.errors import GatewayError, InvalidRequest, NotFound
from gateway.api.parsing import parse_json_object
from gateway.keys.access import ACCESS, AdminAccess, SessionGate, admin_only
from gateway.keys.directory import KeyDirectory
from gateway.keys.errors import Conflict, ReadOnlyStore
from gateway.keys.requests import KeyCreate, KeyUpdate, VirtualKeyCreate, VirtualKeyRotate
from gateway.keys.spend import SpendBook
from gateway.keys.throttle import ADMIN_FAILURES_PER_WINDOW, FailureThrottle
from gateway.keys.virtual import VirtualKeys
from gateway.keys.virtual_store import RedisVirtualKeyStore
from policies.limits.service import KeyUsage, Limits

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class AdminServices:
    keys: KeyDirectory
    virtual_keys: VirtualKeys
    limits: Limits | None = None  # None: usage is not tracked
    spend: SpendBook | None = None  # None: spend is not tracked (GET /admin/spend answers 404)
    deployments: Callable[[], Awaitable[dict[str, Any]]] | None = None  # GET /admin/deployments


ServicesSource = AdminServices | Callable[[], AdminServices]


@dataclass(frozen=True, slots=True)
class _Source:
    get: Callable[[], AdminServices]


SERVICES = web.AppKey("admin_services", _Source)


def admin_app(
    services: ServicesSource,
    admin_key: SecretStr | None,
    *,
    viewer_keys: Mapping[str, SecretStr] | None = None,
    count_failure: Callable[[str], None] | None = None,
    throttle: FailureThrottle | None = None,
    sessions: Callable[[AdminAccess], SessionGate] | None = None,
) -> web.Application | None:
    """The sub-application, or None when no admin key is configured or it is too weak (the admin API
    is off; `gateway.config.loader` warns about a weak one at start-up and in check-config).
    `services` may be a function returning them, for an app that builds its stores at start-up
    (a sub-app must be mounted before then). `viewer_keys`: name -> value of the read-only keys.
    `count_failure(reason)`: the metric of failures. `sessions`: the console's sessions, built from
    the access they stand for (their routes join the app's)."""
    if admin_key is None or not admin_key.get_secret_value():
        return None
    if admin_key_weakness(admin_key.get_secret_value()) is not None:
        return None
    app = web.Application(middlewares=[_errors, admin_only])
    app[SERVICES] = _Source(services) if callable(services) else _Source(lambda: services)
    access = app[ACCESS] = AdminAccess(
        admin_key.get_secret_value(),
        {name: value.get_secret_value() for name, value in (viewer_keys or {}).items()},
        throttle or FailureThrottle(ADMIN_FAILURES_PER_WINDOW),
        count_failure or (lambda reason: None),
    )
    if sessions is not None:
        access.sessions = sessions(access)
        app.router.add_routes(access.sessions.routes())
    app.router.add_routes(
        [
            web.post("/keys", create_key),
            web.get("/keys", list_keys),
            web.get("/keys/{name}", show_key),
            web.patch("/keys/{name}", update_key),
            web.post("/keys/{name}/rotate", rotate_key),
            web.post("/keys/{name}/revoke", revoke_key),
            web.delete("/keys/{name}", revoke_key),
            web.get("/keys/{name}/usage", key_usage),
            web.get("/spend", spend_report),
            web.get("/deployments", deployments_report),
            web.post("/virtual-keys", create_virtual_key),
            web.get("/virtual-keys", list_virtual_keys),
            web.get("/virtual-keys/{name}", show_virtual_key),
            web.post("/virtual-keys/{name}/rotate", rotate_virtual_key),
            web.post("/virtual-keys/{name}/revoke", revoke_virtual_key),
            web.delete("/virtual-keys/{name}", revoke_virtual_key),
        ]
    )
    return app


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except GatewayError as exc:  # the same envelope the gateway's own middleware writes
        response = web.Response(
            status=exc.status, body=exc.body(), content_type="application/json", headers=exc.headers
        )
        if exc.close_connection:  # a body past server.body_timeout_s
            response.force_close()
        return response


async def create_key(request: web.Request) -> web.Response:
    body = await _parse(request, KeyCreate)
    value, record = await _services(request).keys.create(body.name, body.policy())
    return _json({"key": value, "record": record.public()}, status=201)


async def list_keys(request: web.Request) -> web.Response:
    return _json({"data": [record.public() for record in await _services(request).keys.list()]})


async def show_key(request: web.Request) -> web.Response:
    record = await _services(request).keys.get(_name(request))
    if record is None:
        raise _unknown("key", _name(request))
    return _json(record.public())


async def update_key(request: web.Request) -> web.Response:
    """`PATCH /admin/keys/NAME`: the fields given replace the key's (limits, budget, deployments...)."""
    body = await _parse(request, KeyUpdate)
    if "revoked" in body.model_fields_set:
        raise InvalidRequest("A key is revoked with POST /admin/keys/NAME/revoke.", param="revoked")
    record = await _services(request).keys.update(_name(request), body.changes())
    if record is None:
        raise _unknown("key", _name(request))
    return _json(record.public())


async def rotate_key(request: web.Request) -> web.Response:
    rotated = await _services(request).keys.rotate(_name(request))
    if rotated is None:
        raise _unknown("key", _name(request))
    value, record = rotated
    return _json({"key": value, "record": record.public()})


async def revoke_key(request: web.Request) -> web.Response:
    record = await _services(request).keys.revoke(_name(request))
    if record is None:
        raise _unknown("key", _name(request))
    return _json(record.public())


async def key_usage(request: web.Request) -> web.Response:
    services, name = _services(request), _name(request)
    record = await services.keys.get(name)
    if record is None:
        raise _unknown("key", name)
    if services.limits is None:
        raise NotFound("Usage is not tracked by this gateway.", code="usage_not_tracked")
    return _json({"key": name, **_usage(await services.limits.usage(name, record.budget))})


async def spend_report(request: web.Request) -> web.Response:
    """`GET /admin/spend?group_by=key|deployment|metadata.NAME&period=30d` (gateway.keys.spend)."""
    book = _services(request).spend
    if book is None:
        raise NotFound("Spend is not tracked by this gateway.")
    return _json(await book.report(request.query.get("group_by", "key"), request.query.get("period", "30d")))


async def deployments_report(request: web.Request) -> web.Response:
    """`GET /admin/deployments`: each deployment's state, circuit and why it cannot serve (as /ready)."""
    report = _services(request).deployments
    if report is None:
        raise NotFound("Deployments are not reported by this gateway.")
    return _json(await report())


async def create_virtual_key(request: web.Request) -> web.Response:
    body = await _parse(request, VirtualKeyCreate)
    services = _services(request)
    if body.name in services.virtual_keys.configured_names:
        raise Conflict(f"A virtual key named {body.name!r} is defined in the config file.", param="name")
    record = await _vault_store(request).create(body.name, body.provider, body.api_key.get_secret_value())
    if record is None:
        raise Conflict(f"A virtual key named {body.name!r} exists already.", param="name")
    services.virtual_keys.forget(body.name)
    return _json(record.public(), status=201)


async def list_virtual_keys(request: web.Request) -> web.Response:
    services = _services(request)
    stored = await services.virtual_keys.redis.list() if services.virtual_keys.redis else []
    configured = [{"name": name, "source": "config"} for name in sorted(services.virtual_keys.configured_names)]
    return _json({"data": configured + [record.public() for record in stored]})


async def show_virtual_key(request: web.Request) -> web.Response:
    name = _name(request)
    if name in _services(request).virtual_keys.configured_names:
        return _json({"name": name, "source": "config"})
    record = await _vault_store(request).get(name)
    if record is None:
        raise _unknown("virtual key", name)
    return _json(record.public())


async def rotate_virtual_key(request: web.Request) -> web.Response:
    body = await _parse(request, VirtualKeyRotate)
    record = await _vault_store(request).rotate(_name(request), body.api_key.get_secret_value())
    return _changed_virtual_key(request, record)


async def revoke_virtual_key(request: web.Request) -> web.Response:
    return _changed_virtual_key(request, await _vault_store(request).revoke(_name(request)))


def _changed_virtual_key(request: web.Request, record: Any) -> web.Response:
    if record is None:
        raise _unknown("virtual key", _name(request))
    _services(request).virtual_keys.forget(_name(request))
    return _json(record.public())


def _vault_store(request: web.Request) -> RedisVirtualKeyStore:
    services, name = _services(request), request.match_info.get("name", "")
    if name in services.virtual_keys.configured_names:
        raise ReadOnlyStore(f"The virtual key {name!r} is defined in the config file: change it there.", param="name")
    if services.virtual_keys.redis is None:
        raise ReadOnlyStore("Virtual keys are created and changed in Redis: configure redis.url.")
    return services.virtual_keys.redis


async def _parse(request: web.Request, model: type[M]) -> M:
    payload = parse_json_object(await request.read())  # the completions' rules: 400 invalid_json, nesting, numbers
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        first = exc.errors()[0]  # its `input` may be a secret: only the location and the reason are shown
        where = ".".join(str(part) for part in first["loc"])
        raise InvalidRequest(f"{where or 'body'}: {first['msg']}", param=where or None, code="invalid_value") from None


def _usage(usage: KeyUsage) -> dict[str, Any]:
    spend = usage.spend
    return {
        "period": usage.period,
        "period_start": datetime.fromtimestamp(usage.period_start, UTC).isoformat(),
        "period_end": datetime.fromtimestamp(usage.period_end, UTC).isoformat(),
        "tokens": spend.tokens,
        "cost_usd": spend.cost_usd,
        "reserved_tokens": spend.reserved_tokens,
        "reserved_cost_usd": spend.reserved_cost_usd,
        "budget": usage.budget.model_dump(mode="json") if usage.budget.limited else None,
    }


def _services(request: web.Request) -> AdminServices:
    return request.app[SERVICES].get()


def _name(request: web.Request) -> str:
    return request.match_info["name"]


def _unknown(what: str, name: str) -> NotFound:
    return NotFound(f"No {what} named {name!r}.")


def _json(payload: dict[str, Any], status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(payload), status=status, content_type="application/json")
