"""`POST /v1/responses` on a gateway where some deployment speaks the Responses API itself
(`responses: native`): the chat view (`responses.bridged`'s, leniently: `gateway.api.responses.native`)
and, beside it, the client's own body (`NativeRequest`), which the route's deployment is sent as it
came when it is such a deployment. Once the route is known (`routed`), a bridged first candidate
gets the 400s the bridge gives and the header naming the built-in tools left out; a native one
neither (its upstream runs the built-in tools)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gateway.api.errors import InvalidRequest
from gateway.api.responses.bridge import Bridge
from gateway.api.responses.native import lenient_view, rebuilt
from gateway.http.responses import DROPPED_TOOLS, history, owner_of, turns, validate_responses
from gateway.keys.records import KeyRecord
from gateway.observability.record import RequestRecord
from gateway.pipeline.flow import PreparedCall
from gateway.pipeline.responses.edge import ResponsesEdge
from gateway.pipeline.responses.native import NativeResponses
from gateway.pipeline.responses.store import ResponseStore
from providers.base import NativeRequest


@dataclass(slots=True)
class NativeCapable:
    chat: dict[str, Any]  # the chat view the pipeline reads (and a bridged deployment is sent)
    render: NativeResponses
    native: NativeRequest
    dropped: list[str] = field(default_factory=list)  # built-in tools a bridged deployment is not sent
    problems: list[InvalidRequest] = field(default_factory=list)  # what a bridged deployment refuses


async def prepared(
    store: ResponseStore, caller: KeyRecord, headers: Mapping[str, str], payload: dict[str, Any]
) -> NativeCapable:
    request = validate_responses(payload)
    lenient = lenient_view(request)  # the chat view without what only a native deployment takes
    if lenient.without_choice:
        request = request.model_copy(update={"tool_choice": None})
    # Its id is drawn only if a bridged deployment answers (`NativeResponses.bridged_edge`).
    bridge = Bridge(request, lenient.items, lenient.tools, id="")
    owner = owner_of(caller, headers)
    found = await turns(store, request.previous_response_id, owner) if request.previous_response_id else []
    earlier = history(found) if found else []
    chat = bridge.chat_payload(earlier)
    edge = ResponsesEdge(bridge, None if request.store is False else store, owner)
    # The response continued is the deployment's own, as it came: that deployment is sent
    # previous_response_id as it is; any other deployment the chain written into `input`.
    upstream = found[0].get("upstream") if found else None
    written = rebuilt(payload, earlier) if found else None
    if isinstance(upstream, str):
        native = NativeRequest(payload, {}, "responses", upstream, written, owner)
    else:
        native = NativeRequest(written or payload, {}, "responses", partition=owner)
    own = 1 if isinstance(request.input, str) else len(request.input)
    render = NativeResponses(edge, native, own)
    return NativeCapable(chat, render, native, bridge.tools.dropped, lenient.problems)


def routed(call: PreparedCall, record: RequestRecord, capable: NativeCapable) -> None:
    """The route is known: what its first candidate refuses, or is not sent, is said now."""
    if "responses" in call.plan.tiers[0].members[0].native_apis:  # `sends_native`
        return
    if capable.problems:
        raise capable.problems[0]
    if capable.dropped:
        record.dropped_tools = call.response_headers[DROPPED_TOOLS] = ",".join(capable.dropped)
