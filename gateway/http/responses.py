"""`/v1/responses`: the Responses API bridged onto the chat pipeline (`POST`), and its stored
responses (`GET`, `DELETE`, `GET …/input_items`), each the owner's alone: another key reads 404."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from typing import Any

import orjson
from aiohttp import web
from pydantic import ValidationError

from gateway.api.errors import GatewayError, InvalidRequest, NotFound
from gateway.api.parsing import to_invalid_request
from gateway.api.responses.bridge import Bridge, responses_param
from gateway.api.responses.items import Item
from gateway.api.responses.request import ResponsesRequest
from gateway.api.responses.texts import bridgeable
from gateway.http.app_keys import RECORD, SERVING
from gateway.keys.records import KeyRecord
from gateway.keys.virtual import presented_virtual_key
from gateway.observability.record import RequestRecord
from gateway.pipeline.responses.edge import ResponsesEdge
from gateway.pipeline.responses.store import ResponseStore, Stored

log = logging.getLogger(__name__)

RESPONSES_PATHS = ("/v1/responses", "/responses")
DROPPED_TOOLS = "x-gateway-dropped-tools"
MAX_CHAIN = 256  # responses a previous_response_id may reach back through


_OWNERS: dict[tuple[str, str], str] = {}  # (source, key name) -> owner, for the keys of late presenting no virtual key
_MAX_OWNERS = 4096


def owner_of(caller: KeyRecord, headers: Mapping[str, str]) -> str:
    """Whose stored responses these are: the API key, and the virtual key it presented."""
    virtual = presented_virtual_key(headers)
    if virtual:  # never kept: a virtual key is a secret
        return _owner(caller.source, caller.name, virtual)
    found = _OWNERS.get((caller.source, caller.name))
    if found is None:
        if len(_OWNERS) >= _MAX_OWNERS:  # a bound, not an LRU: the keys of late come back at once
            _OWNERS.clear()
        found = _OWNERS[(caller.source, caller.name)] = _owner(caller.source, caller.name, "")
    return found


def _owner(source: str, name: str, virtual: str) -> str:
    return hashlib.sha256(f"{source}\0{name}\0{virtual}".encode()).hexdigest()


def validate_responses(payload: dict[str, Any]) -> ResponsesRequest:
    try:
        return ResponsesRequest.model_validate(payload)
    except ValidationError as exc:
        raise to_invalid_request(exc.errors()) from None


async def bridged(
    store: ResponseStore, caller: KeyRecord, headers: Mapping[str, str], payload: dict[str, Any], record: RequestRecord
) -> tuple[dict[str, Any], ResponsesEdge, dict[str, str]]:
    """The chat body for a Responses body (the chain behind previous_response_id included), the
    edge that renders its answer, and the headers the answer gets."""
    request = validate_responses(payload)
    bridge = Bridge.of(request)
    owner = owner_of(caller, headers)
    history = await chain(store, request.previous_response_id, owner) if request.previous_response_id else []
    chat = bridge.chat_payload(history)
    extra: dict[str, str] = {}
    if bridge.tools.dropped:
        record.dropped_tools = extra[DROPPED_TOOLS] = ",".join(bridge.tools.dropped)
    return chat, ResponsesEdge(bridge, None if request.store is False else store, owner), extra


def renamed(error: GatewayError) -> GatewayError:
    """`error` with its param (and the message's mention of it) named as the Responses body names it."""
    if error.param is None:
        return error
    param = responses_param(error.param)
    if param != error.param:
        error.message = error.message.replace(f"'{error.param}'", f"'{param}'")
        error.args = (error.message,)
        error.param = param
    return error


async def chain(store: ResponseStore, first: str, owner: str) -> list[Item]:
    """The conversation up to and including response `first`: each response's input items and output."""
    return history(await turns(store, first, owner))


async def turns(store: ResponseStore, first: str, owner: str) -> list[Stored]:
    """The stored responses behind previous_response_id `first`, the latest first."""
    found_turns: list[Stored] = []
    next_id: str | None = first
    while next_id is not None:
        if len(found_turns) == MAX_CHAIN:
            raise InvalidRequest(
                f"The conversation behind previous_response_id is longer than {MAX_CHAIN} responses.",
                param="previous_response_id",
                code="invalid_value",
            )
        found = await store.get(next_id, owner)
        if found is None:
            raise NotFound(
                f"Previous response with id '{next_id}' not found.", param="previous_response_id", code="not_found"
            )
        found_turns.append(found)
        next_id = found.get("previous")
    return found_turns


def history(found_turns: list[Stored]) -> list[Item]:
    """The items of `found_turns` (the latest first) in the conversation's order, as input items: those
    the bridge carries (a native response's built-in tool calls, say, are left out)."""
    items: list[Item] = []
    for turn in reversed(found_turns):
        items += [_as_input(item) for item in turn["input_items"] if bridgeable(item, "input") is None]
        items += [_as_input(item) for item in turn["response"]["output"] if bridgeable(item, "input") is None]
    return items


def _as_input(item: Item) -> Item:
    return {key: value for key, value in item.items() if key not in ("id", "status")}


async def _stored(request: web.Request) -> tuple[ResponseStore, str, str]:
    serving = request.app[SERVING]
    caller = await serving.current.pipeline.authenticate(request.headers)
    request[RECORD].authenticated("-" if caller.source == "open" else caller.name, caller.metadata)
    return serving.shared.responses, request.match_info["response_id"], owner_of(caller, request.headers)


def _missing(response_id: str) -> NotFound:
    return NotFound(f"Response with id '{response_id}' not found.", param="response_id", code="not_found")


async def retrieve(request: web.Request) -> web.Response:
    store, response_id, owner = await _stored(request)
    found = await store.get(response_id, owner)
    if found is None:
        raise _missing(response_id)
    return _json(found["response"])


async def delete(request: web.Request) -> web.Response:
    """Delete a stored response; one a native deployment answered is deleted from its upstream too."""
    store, response_id, owner = await _stored(request)
    found = await store.get(response_id, owner)
    if found is None or not await store.delete(response_id, owner):
        raise _missing(response_id)
    if isinstance(found.get("native"), str):
        await _forget_upstream(request, found["native"], response_id)
    return _json({"id": response_id, "object": "response", "deleted": True})


async def _forget_upstream(request: web.Request, name: str, response_id: str) -> None:
    """Ask deployment `name`'s upstream to delete the response it stored, with the credential the
    caller's requests use there (a virtual key's, when it names one). Best effort: the gateway's
    copy is gone already, and a failure is logged (the upstream's retention ends it)."""
    pipeline = request.app[SERVING].current.pipeline
    deployment = pipeline.deployments.get(name)
    if deployment is None or deployment.provider is None:
        return
    caller = await pipeline.authenticate(request.headers)
    try:
        credential = await pipeline.gatekeeper.credential(caller, request.headers, deployment)
    except GatewayError:
        credential = None
    forget = getattr(pipeline.provider_for(deployment, credential), "delete_response", None)
    if forget is not None and not await forget(response_id, request[RECORD].request_id, deployment.timeout_s):
        log.warning("response %s: deployment %s did not delete its upstream copy", response_id, name)


async def input_items(request: web.Request) -> web.Response:
    store, response_id, owner = await _stored(request)
    found = await store.get(response_id, owner)
    if found is None:
        raise _missing(response_id)
    items: list[Item] = found["input_items"]
    order = request.query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise InvalidRequest("Invalid 'order': must be 'asc' or 'desc'.", param="order", code="invalid_value")
    if order == "desc":
        items = items[::-1]
    after = request.query.get("after")
    if after is not None:
        ids = [item["id"] for item in items]
        items = items[ids.index(after) + 1 :] if after in ids else []
    limit = _limit(request.query.get("limit", "20"))
    page = items[:limit]
    return _json(
        {
            "object": "list",
            "data": page,
            "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None,
            "has_more": len(items) > limit,
        }
    )


async def cancel(request: web.Request) -> web.Response:
    """`POST …/cancel` cancels a background response; there is no background mode here."""
    await _stored(request)  # an unknown caller is a 401 first
    raise InvalidRequest(
        "Only a background response can be cancelled, and this gateway has no background mode "
        "(a request with background: true is refused): nothing is running to cancel.",
        param="response_id",
        code="unsupported_background",
    )


def _limit(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 100:
        raise InvalidRequest("Invalid 'limit': must be an integer from 1 to 100.", param="limit", code="invalid_value")
    return int(text)


def _json(body: object) -> web.Response:
    return web.Response(body=orjson.dumps(body), content_type="application/json")
