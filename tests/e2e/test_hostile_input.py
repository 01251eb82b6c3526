"""Hostile input over real loopback sockets: every request the gateway can read gets 200 or a 4xx
OpenAI envelope with a non-null `code` (and `param` naming the field or header at fault); never a
5xx, never text/plain, and never a header's value in a response or a log line.

Malformed HTTP is written byte by byte with asyncio streams (no client library would send it).
Server-level behaviour (aiohttp's own parser errors, slow clients) is checked on the gateway as the
tests run it (`make_gateway`) and as an operator runs it (`gateway serve`, its stderr included).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import signal
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import orjson
import pytest
import yaml
from aiohttp import web
from aiohttp.test_utils import TestServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pytest_aiohttp import AiohttpServer

from gateway.api.parsing import MAX_JSON_DEPTH
from gateway.config.settings import ServerConfig
from gateway.http.protocol import GatewayApplication, GatewayRequestHandler
from gateway.http.request_headers import exception_summary, redact
from tests.conftest import GatewayFactory, deployment
from tests.e2e.test_serve_process import GATEWAY, free_port, wait_until_listening
from tests.support.fake_upstream import FakeUpstream

TEAM_KEY = "sk-gw-team-0123456789abcdef"
ADMIN_KEY = "sk-admin-0123456789abcdef-Jm3Rx8"
PROVIDER_KEY = "sk-provider-secret-0123456789"
ENV = {"TEAM_KEY": TEAM_KEY, "ADMIN_KEY": ADMIN_KEY, "PROVIDER_KEY": PROVIDER_KEY}
CANARY = "Zq9CanaryW7x"  # inside every fuzzed header value: it must never come back
CANARY_KEY = f"sk-{CANARY}-0123456789"  # an Authorization value the parser-level cases carry
BODY = b'{"model": "fake", "prompt": "hi"}'

# Every header the gateway reads, with values that mean something to it (to reach past auth,
# routing and the cache) beside the random ones.
MEANINGFUL: dict[str, list[str]] = {
    "Authorization": [f"Bearer {TEAM_KEY}", f"Bearer {ADMIN_KEY}", "Bearer", "Basic abc"],
    "x-gateway-api-key": [TEAM_KEY, ""],
    "x-portkey-api-key": [TEAM_KEY],
    "apikey": [TEAM_KEY],
    "x-gateway-virtual-key": ["vk-openai", "vk-other"],
    "x-gateway-deployment": ["fake", "fake-model", "nope"],
    "x-gateway-tags": ["hosted", "hosted,cheap", ",", "other"],
    "x-gateway-cache-namespace": ["team-ns", " ", "équipe"],
    "Cache-Control": ["no-cache", "no-store", "max-age=5", "max-age=" + "9" * 4300, "max-age=x", "no-cache=1"],
    "x-request-id": ["req-1", "bad id"],
    "x-gateway-refresh-config": ["true", "false"],
    "x-gateway-admin-key": [ADMIN_KEY],
    "Content-Type": ["application/json", "application/json; charset=utf-8", "text/plain", ""],
}
# 150 examples keep the suite fast; HOSTILE_EXAMPLES=5000 digs deeper. The gateway is a fixture of
# the test, shared by its examples (no state of one example matters to the next).
FUZZ = settings(
    max_examples=int(os.environ.get("HOSTILE_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
VALID_REQUEST_ID = re.compile(rb"^[A-Za-z0-9._:/=+-]{1,128}$")
PATHS = ["/v1/completions", "/v1/models", "/admin/keys", "/admin/virtual-keys", "/health", "/nowhere"]


def gateway_config(upstream: FakeUpstream, **server: Any) -> dict[str, Any]:
    fake = deployment(
        "fake",
        upstream.base_url,
        aliases=["fake-model"],
        tags=["hosted", "cheap"],
        policies=["cached"],
        timeout_s=30,  # the fake answers at once; a loaded machine's slow answer is no 504
        retries=0,
    )
    return {
        "server": server,
        "keys": [{"name": "team", "key": "${TEAM_KEY}", "virtual_keys": ["vk-openai"]}],
        "admin": {"key": "${ADMIN_KEY}"},
        "virtual_keys": [{"name": "vk-openai", "provider": "openai", "api_key": "${PROVIDER_KEY}"}],
        "deployments": [fake],
        "policies": {"cached": {"cache": {"ttl_s": 60, "redis": False}}},
    }


# --- raw HTTP over a socket ---------------------------------------------------------------------


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes
    raw: bytes

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").partition(";")[0].strip()

    def error(self) -> dict[str, Any]:
        envelope = orjson.loads(self.body)
        assert set(envelope) == {"error"}, self.raw
        error: dict[str, Any] = envelope["error"]
        assert set(error) == {"message", "type", "param", "code"}, self.raw
        return error


async def exchange(port: int, *parts: bytes, gap_s: float = 0.0, timeout_s: float = 20) -> Answer:
    """Write `parts` (pausing `gap_s` between them) while reading until the server closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)

    async def send() -> None:
        for index, part in enumerate(parts):
            if index and gap_s:
                await asyncio.sleep(gap_s)
            writer.write(part)
            await writer.drain()

    sending = asyncio.create_task(send())
    try:
        raw = await asyncio.wait_for(reader.read(), timeout_s)
    finally:
        sending.cancel()
        with contextlib.suppress(asyncio.CancelledError, ConnectionError):
            await sending
        writer.close()
    return parse_answer(raw)


async def answer_read(reader: asyncio.StreamReader) -> bytes:
    """One answer: its head and a body of its Content-Length."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = parse_answer(head).headers.get("content-length", "0")
    return head + await reader.readexactly(int(length))


async def exchange_in_turn(
    port: int, first: bytes, then: bytes, when: Callable[[asyncio.StreamReader], Awaitable[bytes]]
) -> Answer:
    """Write `first`; once `when` (given the reader) has returned what it read, write `then`; read
    until the server closes. Seen, not timed: a pause between the two was a guess at how long the
    server takes, wrong on a loaded machine."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        async with asyncio.timeout(30):  # a bound for a hang, not a speed
            writer.write(first)
            early = await when(reader)
            writer.write(then)
            raw = early + await reader.read()
    finally:
        writer.close()
    return parse_answer(raw)


def handlers(gateway: TestServer) -> list[GatewayRequestHandler]:
    """The gateway's connections, as its server handles them."""
    assert gateway.runner is not None
    assert gateway.runner.server is not None
    return [cast(GatewayRequestHandler, handler) for handler in gateway.runner.server.connections]


async def until_the_server(gateway: TestServer, condition: Callable[[GatewayRequestHandler], bool]) -> None:
    """Until one of the gateway's connections is in the state `condition` names."""
    while not any(condition(handler) for handler in handlers(gateway)):  # noqa: ASYNC110 - the server's own state
        await asyncio.sleep(0.005)


def reading_a_body(handler: GatewayRequestHandler) -> bool:
    """A request is being handled whose body has not all arrived: its handler waits for more."""
    payload = handler._last_payload
    return handler._request_in_progress and payload is not None and not payload.is_eof()


def awaiting_headers(handler: GatewayRequestHandler) -> bool:
    """Some bytes of a request's headers arrived, not all: the header timeout runs."""
    return handler._header_timer is not None


def parse_answer(raw: bytes) -> Answer:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0].startswith(b"HTTP/1."), raw[:200]
    headers = {}
    for line in lines[1:]:
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    return Answer(int(lines[0].split()[1]), headers, body, raw)


def request(
    path: str = "/v1/completions",
    headers: list[tuple[bytes, bytes]] | None = None,
    body: bytes = BODY,
    method: bytes = b"POST",
) -> bytes:
    lines = [method + b" " + path.encode() + b" HTTP/1.1", b"Host: gateway", b"Connection: close"]
    lines += [name + b": " + value for name, value in headers or []]
    if method == b"POST":
        lines.append(b"Content-Length: " + str(len(body)).encode())
    return b"\r\n".join(lines) + b"\r\n\r\n" + (body if method == b"POST" else b"")


def assert_well_formed(answer: Answer) -> dict[str, Any] | None:
    """200, or a 4xx envelope with a code; the error, if any."""
    assert answer.status < 500, answer.raw[:500]
    assert answer.content_type != "text/plain", answer.raw[:500]
    if answer.status == 200:
        return None
    assert 400 <= answer.status < 500, answer.raw[:500]
    assert answer.content_type == "application/json", answer.raw[:500]
    error = answer.error()
    assert error["code"], answer.raw[:500]
    return error


# --- fuzzed headers -----------------------------------------------------------------------------


def hostile_values() -> st.SearchStrategy[bytes]:
    """Random bytes (non-UTF-8 and control characters included; CR and LF would end the line)
    around the canary."""
    noise = st.binary(max_size=12).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b""))
    return st.tuples(noise, noise).map(lambda pair: pair[0] + CANARY.encode() + pair[1])


def header_value(name: str) -> st.SearchStrategy[tuple[bytes, bool]]:
    """(value, whether it carries the canary)."""
    meaningful = st.sampled_from(MEANINGFUL[name]).map(lambda value: (value.encode(), False))
    return st.one_of(meaningful, hostile_values().map(lambda value: (value, True)))


fuzzed_headers = st.sets(st.sampled_from(sorted(MEANINGFUL)), min_size=1, max_size=5).flatmap(
    lambda chosen: st.fixed_dictionaries({name: header_value(name) for name in chosen})
)


@pytest.fixture
async def fuzzed(make_gateway: GatewayFactory, upstream: FakeUpstream) -> TestServer:
    """One gateway for all the examples of a test (hypothesis runs them inside one test call)."""
    return await make_gateway(gateway_config(upstream), ENV)


@FUZZ
@given(headers=fuzzed_headers, path=st.sampled_from(PATHS), stream=st.booleans())
async def test_fuzzed_headers_get_an_envelope_and_are_never_echoed(
    fuzzed: TestServer,
    caplog: pytest.LogCaptureFixture,
    headers: dict[str, tuple[bytes, bool]],
    path: str,
    stream: bool,
) -> None:
    caplog.set_level(logging.DEBUG)
    logged_before = len(caplog.text)
    body = b'{"model": "fake", "prompt": "hi", "stream": true}' if stream else BODY
    method = b"POST" if path.startswith(("/v1/completions", "/admin")) else b"GET"
    sent = [(name.encode(), value) for name, (value, _) in headers.items()]

    answer = await exchange(fuzzed.port or 0, request(path, sent, body, method))

    error = assert_well_formed(answer)
    if error is not None and error["code"] in ("invalid_header", "unsupported_media_type"):
        assert error["param"] in headers, error
    request_id = headers.get("x-request-id", (b"", False))[0]
    if any(hostile for _, hostile in headers.values()) and not VALID_REQUEST_ID.match(request_id):
        # (a well-formed x-request-id is the one value echoed, in a header and the logs, by design)
        assert CANARY.encode() not in answer.raw, answer.raw[:500]
        assert CANARY not in caplog.text[logged_before:]
    assert CANARY.encode() not in answer.body, answer.raw[:500]


# --- fuzzed bodies ------------------------------------------------------------------------------

FIELDS = [
    "model",
    "prompt",
    "best_of",
    "echo",
    "frequency_penalty",
    "presence_penalty",
    "logit_bias",
    "logprobs",
    "max_tokens",
    "n",
    "seed",
    "stop",
    "stream",
    "stream_options",
    "suffix",
    "temperature",
    "top_p",
    "user",
    "context",
    "top_k",
]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=12,
)


def nested(field: str, depth: int, kind: str) -> bytes:
    opener = "[" if kind == "array" else '{"a":'
    closer = "]" if kind == "array" else "}"
    value = opener * depth + "1" + closer * depth
    return f'{{"model": "fake", "prompt": "hi", "{field}": {value}}}'.encode()


def huge_number(field: str, digits: int, exponent: bool) -> bytes:
    number = "9" * digits + ("e999" if exponent else "")
    return f'{{"model": "fake", "prompt": "hi", "{field}": {number}}}'.encode()


def with_fields(values: dict[str, Any]) -> bytes:
    return json.dumps({"model": "fake", "prompt": "hi", **values}).encode()


bodies = st.one_of(
    st.binary(max_size=64).map(lambda raw: (raw, None)),
    json_values.map(lambda value: (json.dumps(value).encode(), None)),
    st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=4).map(lambda values: (with_fields(values), None)),
    st.builds(
        lambda field, depth, kind: (nested(field, depth, kind), field if depth >= MAX_JSON_DEPTH else None),
        st.sampled_from(FIELDS),
        st.integers(min_value=1, max_value=1500),
        st.sampled_from(["array", "object"]),
    ),
    st.builds(
        # In a field the request model does not know (top_k), a number a double holds is relayed.
        lambda field, digits, exponent: (
            huge_number(field, digits, exponent),
            field if exponent or digits > 308 or field != "top_k" else None,
        ),
        st.sampled_from(FIELDS),
        st.integers(min_value=21, max_value=6000),
        st.booleans(),
    ),
)


@FUZZ
@given(body=bodies, content_type=st.sampled_from([None, "application/json"]))
async def test_fuzzed_bodies_get_an_envelope_naming_the_field(
    fuzzed: TestServer, body: tuple[bytes, str | None], content_type: str | None
) -> None:
    raw, field_at_fault = body
    headers = [(b"Authorization", f"Bearer {TEAM_KEY}".encode())]
    if content_type is not None:
        headers.append((b"Content-Type", content_type.encode()))

    answer = await exchange(fuzzed.port or 0, request("/v1/completions", headers, raw))

    error = assert_well_formed(answer)
    if field_at_fault is not None:
        assert error is not None, answer.raw[:300]
        assert error["param"] == field_at_fault, error
    if error is not None and error["code"] == "invalid_value":
        assert error["param"], error


# --- the cases one by one -----------------------------------------------------------------------


@pytest.fixture
async def gateway(make_gateway: GatewayFactory, upstream: FakeUpstream) -> TestServer:
    """Short header and body timeouts: for clients that stall past them."""
    return await make_gateway(gateway_config(upstream, body_timeout_s=0.5, header_timeout_s=0.5), ENV)


@pytest.fixture
async def patient(make_gateway: GatewayFactory, upstream: FakeUpstream) -> TestServer:
    """Header and body timeouts far past what a loaded machine takes between a client's writes: for
    clients that pause without stalling (under the short ones, a slow run read as a stall, 408)."""
    return await make_gateway(gateway_config(upstream, body_timeout_s=30, header_timeout_s=30), ENV)


CANARY_BEARER = b"Bearer " + CANARY_KEY.encode()
AUTH = b"Authorization: " + CANARY_BEARER
PARSER_ERRORS = {
    "oversized-header": request(headers=[(b"Authorization", b"Bearer " + CANARY_KEY.encode() + b"x" * 9000)]),
    "nul-in-header": request(headers=[(b"Authorization", b"Bearer " + CANARY_KEY.encode() + b"\x00")]),
    "control-char-in-header": request(headers=[(b"x-gateway-api-key", CANARY_KEY.encode() + b"\x01")]),
    "broken-chunked-framing": b"POST /v1/completions HTTP/1.1\r\nHost: g\r\n"
    + AUTH
    + b"\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"
    + BODY
    + b"\r\n0\r\n\r\n",
    "duplicate-content-length": b"POST /v1/completions HTTP/1.1\r\nHost: g\r\n"
    + AUTH
    + b"\r\nContent-Length: 33\r\nContent-Length: 34\r\n\r\n"
    + BODY,
    "bad-request-line": b"POST /v1/\x01completions HTTP/1.1\r\n" + AUTH + b"\r\n\r\n",
    "bad-method": b"P{ST /v1/completions HTTP/1.1\r\n" + AUTH + b"\r\n\r\n",
    "bad-version": b"POST /v1/completions HTTP/9.x\r\n" + AUTH + b"\r\n\r\n",
    "header-without-colon": b"POST /v1/completions HTTP/1.1\r\n" + AUTH + b"\r\nno colon here\r\n\r\n",
    "too-many-headers": request(
        headers=[(b"Authorization", CANARY_BEARER), *[(b"x-h%d" % i, b"1") for i in range(200)]]
    ),
    "undecodable-content-encoding": request(headers=[(b"Authorization", CANARY_BEARER), (b"Content-Encoding", b"br")]),
    "http-1.0-body-without-length": b"POST /v1/completions HTTP/1.0\r\n" + AUTH + b"\r\n\r\n" + BODY,
}


@pytest.mark.parametrize("raw", list(PARSER_ERRORS.values()), ids=list(PARSER_ERRORS))
async def test_parser_errors_get_the_envelope_without_echoing_the_request(
    gateway: TestServer, caplog: pytest.LogCaptureFixture, raw: bytes
) -> None:
    caplog.set_level(logging.DEBUG)

    answer = await exchange(gateway.port or 0, raw)

    assert answer.status == 400, answer.raw
    assert answer.content_type == "application/json"
    error = answer.error()
    assert (error["code"], error["type"]) == ("invalid_http", "invalid_request_error")
    assert CANARY.encode() not in answer.raw
    assert CANARY not in caplog.text


async def test_a_malformed_chunk_after_the_body_began_is_a_400(patient: TestServer) -> None:
    auth = f"Authorization: Bearer {TEAM_KEY}".encode()
    head = b"POST /v1/completions HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked\r\n" + auth + b"\r\n\r\n"

    async def reading_the_body(_: asyncio.StreamReader) -> bytes:
        await until_the_server(patient, reading_a_body)  # the handler waits for more
        return b""

    answer = await exchange_in_turn(
        patient.port or 0, head + b"5\r\n" + BODY[:5] + b"\r\n", b"zz\r\n", when=reading_the_body
    )

    assert answer.status == 400
    assert answer.error()["code"] == "invalid_http"
    assert answer.headers.get("connection", "").lower() == "close"


async def test_a_malformed_chunk_after_an_early_answer_closes_the_connection(
    patient: TestServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The 401 goes out before the body is read; the broken framing that follows ends the connection."""
    caplog.set_level(logging.DEBUG)
    head = b"POST /v1/completions HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked\r\n" + AUTH + b"\r\n\r\n"

    # The rest of the body once the 401 has arrived: after the early answer, whatever the machine's speed.
    answer = await exchange_in_turn(patient.port or 0, head + b"5\r\n" + BODY[:5] + b"\r\n", b"zz\r\n", answer_read)

    assert answer.status == 401
    assert "Unhandled exception" not in caplog.text


async def test_a_body_that_does_not_decompress_is_a_400(gateway: TestServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    headers = [(b"Authorization", f"Bearer {TEAM_KEY}".encode()), (b"Content-Encoding", b"gzip")]

    answer = await exchange(gateway.port or 0, request(headers=headers, body=b"not gzip at all"))

    assert answer.status == 400
    assert answer.error()["code"] == "invalid_http"
    assert "Unhandled exception" not in caplog.text


async def test_an_unknown_expectation_is_a_417_naming_the_header(gateway: TestServer) -> None:
    headers = [(b"Authorization", f"Bearer {TEAM_KEY}".encode()), (b"Expect", CANARY.encode())]

    answer = await exchange(gateway.port or 0, request(headers=headers))

    assert answer.status == 417
    assert (answer.error()["code"], answer.error()["param"]) == ("expectation_failed", "Expect")
    assert CANARY.encode() not in answer.raw


@pytest.mark.parametrize(
    ("header", "value"),
    [
        ("Authorization", b"Bearer sk-\xff\xfe" + CANARY.encode()),
        ("x-gateway-api-key", CANARY.encode() + b"\xc3\x28"),
        ("x-portkey-api-key", b"\x80" + CANARY.encode()),
        ("apikey", b"\xed\xa0\x80" + CANARY.encode()),
        ("x-gateway-virtual-key", b"vk-\xff" + CANARY.encode()),
        ("x-gateway-deployment", b"fa\xffke" + CANARY.encode()),
        ("x-gateway-tags", b"hosted,\xff" + CANARY.encode()),
        ("x-gateway-cache-namespace", b"ns\xff" + CANARY.encode()),
        ("Cache-Control", b"max-age=\xff" + CANARY.encode()),
        ("x-gateway-refresh-config", b"tr\xffue" + CANARY.encode()),
        ("x-gateway-admin-key", b"\xff" + CANARY.encode()),
    ],
)
async def test_undecodable_header_values_are_a_400_naming_the_header(
    gateway: TestServer, caplog: pytest.LogCaptureFixture, header: str, value: bytes
) -> None:
    caplog.set_level(logging.DEBUG)
    headers = [(b"Authorization", f"Bearer {TEAM_KEY}".encode())] if header != "Authorization" else []

    answer = await exchange(gateway.port or 0, request(headers=[*headers, (header.encode(), value)]))

    assert answer.status == 400, answer.raw
    error = answer.error()
    assert (error["code"], error["param"]) == ("invalid_header", header)
    assert CANARY.encode() not in answer.raw
    assert CANARY not in caplog.text


@pytest.mark.parametrize(
    ("header", "value", "param"),
    [
        ("x-gateway-deployment", CANARY, "x-gateway-deployment"),
        ("x-gateway-tags", f"{CANARY},other", "x-gateway-tags"),
        ("x-gateway-virtual-key", CANARY, "x-gateway-virtual-key"),
        ("Cache-Control", f"max-age={CANARY}", "Cache-Control"),
        ("Cache-Control", f"no-store={CANARY}", "Cache-Control"),
        ("x-portkey-cache-force-refresh", CANARY, "x-portkey-cache-force-refresh"),
        ("x-gateway-cache-namespace", CANARY * 30, "x-gateway-cache-namespace"),
        ("Content-Type", f"text/{CANARY}", "Content-Type"),
        ("x-gateway-api-key", CANARY, None),  # an unknown key: 401, no field at fault
    ],
)
async def test_readable_but_wrong_header_values_are_never_quoted_back(
    gateway: TestServer, header: str, value: str, param: str | None
) -> None:
    headers = [(b"Authorization", f"Bearer {TEAM_KEY}".encode())] if header != "x-gateway-api-key" else []

    answer = await exchange(gateway.port or 0, request(headers=[*headers, (header.encode(), value.encode())]))

    error = assert_well_formed(answer)
    assert error is not None
    assert error["param"] == param
    assert CANARY.encode() not in answer.raw


async def test_a_4300_digit_max_age_is_bounded_not_an_error(gateway: TestServer) -> None:
    """RFC 9111 §1.2.2: a delta-seconds past what the cache can represent means 2**31 (forever)."""
    headers = [(b"Authorization", f"Bearer {TEAM_KEY}".encode()), (b"Cache-Control", b"max-age=" + b"9" * 4300)]

    answer = await exchange(gateway.port or 0, request(headers=headers))

    assert answer.status == 200, answer.raw
    assert answer.headers["x-gateway-cache-status"] in ("MISS", "HIT")


async def test_a_malformed_cache_control_has_a_code_and_names_the_header(gateway: TestServer) -> None:
    headers = [(b"Authorization", f"Bearer {TEAM_KEY}".encode()), (b"Cache-Control", b"max-age=soon")]

    error = (await exchange(gateway.port or 0, request(headers=headers))).error()

    assert (error["code"], error["param"]) == ("invalid_header", "Cache-Control")


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH, 254, 1023, 1025, 5000])
async def test_deep_nesting_is_a_400_naming_the_field(gateway: TestServer, upstream: FakeUpstream, depth: int) -> None:
    headers = [(b"Authorization", f"Bearer {TEAM_KEY}".encode())]

    answer = await exchange(gateway.port or 0, request(headers=headers, body=nested("top_k", depth, "array")))

    assert answer.status == 400, answer.raw
    assert (answer.error()["param"], answer.error()["code"]) == ("top_k", "invalid_value")
    assert upstream.received == []


async def test_nesting_within_the_bound_is_relayed(gateway: TestServer, upstream: FakeUpstream) -> None:
    headers = [(b"Authorization", f"Bearer {TEAM_KEY}".encode())]

    answer = await exchange(
        gateway.port or 0, request(headers=headers, body=nested("top_k", MAX_JSON_DEPTH - 2, "object"))
    )

    assert answer.status == 200, answer.raw
    assert len(upstream.received) == 1


@pytest.mark.parametrize("number", ["9" * 4300, "9" * 6000, "-" + "9" * 5000, "1e400", "9" * 30])
async def test_huge_numbers_in_an_unknown_field_are_a_400_naming_it(gateway: TestServer, number: str) -> None:
    body = f'{{"model": "fake", "prompt": "hi", "top_k": {number}}}'.encode()
    headers = [(b"Authorization", f"Bearer {TEAM_KEY}".encode())]

    answer = await exchange(gateway.port or 0, request(headers=headers, body=body))

    if number == "9" * 30:  # within a double's range: relayed, as before
        assert answer.status == 200, answer.raw
        return
    assert answer.status == 400, answer.raw
    assert (answer.error()["param"], answer.error()["code"]) == ("top_k", "invalid_value")


async def test_a_4300_digit_number_in_a_known_field_is_a_400_naming_it(gateway: TestServer) -> None:
    body = b'{"model": "fake", "prompt": "hi", "max_tokens": ' + b"9" * 4300 + b"}"
    headers = [(b"Authorization", f"Bearer {TEAM_KEY}".encode())]

    error = (await exchange(gateway.port or 0, request(headers=headers, body=body))).error()

    assert (error["param"], error["code"]) == ("max_tokens", "invalid_value")


async def test_a_body_without_content_type_is_read_as_json(gateway: TestServer, upstream: FakeUpstream) -> None:
    headers = [(b"Authorization", f"Bearer {TEAM_KEY}".encode())]

    answer = await exchange(gateway.port or 0, request(headers=headers))

    assert answer.status == 200, answer.raw
    assert upstream.received[0].body == orjson.loads(BODY)


async def test_other_content_types_are_a_415_naming_the_header(gateway: TestServer) -> None:
    headers = [(b"Authorization", f"Bearer {TEAM_KEY}".encode()), (b"Content-Type", b"text/plain")]

    answer = await exchange(gateway.port or 0, request(headers=headers))

    assert answer.status == 415
    assert (answer.error()["code"], answer.error()["param"]) == ("unsupported_media_type", "Content-Type")


@pytest.mark.parametrize(
    ("path", "body", "code", "param"),
    [
        ("/admin/keys", b"", "invalid_json", None),
        ("/admin/keys", b"{not json", "invalid_json", None),
        ("/admin/keys", b"[1]", "invalid_json", None),
        ("/admin/keys", b'{"name": 5}', "invalid_value", "name"),
        ("/admin/keys", b'{"name": ' + b"[" * 300 + b"]" * 300 + b"}", "invalid_value", "name"),
        ("/admin/keys", b'{"name": "x", "limits": {"rpm": ' + b"9" * 5000 + b"}}", "invalid_value", "limits"),
        ("/admin/virtual-keys", b'{"name": "x", "provider": "openai", "api_key": 1}', "invalid_value", "api_key"),
    ],
)
async def test_admin_bodies_get_codes_and_params(
    gateway: TestServer, path: str, body: bytes, code: str, param: str | None
) -> None:
    headers = [(b"Authorization", f"Bearer {ADMIN_KEY}".encode())]

    answer = await exchange(gateway.port or 0, request(path, headers, body))

    assert answer.status == 400, answer.raw
    assert (answer.error()["code"], answer.error()["param"]) == (code, param)


@pytest.mark.parametrize(
    ("method", "path", "status", "code"),
    [
        (b"GET", "/nowhere", 404, "not_found"),
        (b"GET", "/v1/completions", 405, "method_not_allowed"),
        (b"DELETE", "/v1/models", 405, "method_not_allowed"),
        (b"GET", "/admin/nowhere", 404, "not_found"),
        (b"PUT", "/admin/keys", 405, "method_not_allowed"),
    ],
)
async def test_aiohttps_own_pages_are_envelopes_with_codes(
    gateway: TestServer, method: bytes, path: str, status: int, code: str
) -> None:
    answer = await exchange(
        gateway.port or 0, request(path, [(b"Authorization", b"Bearer " + ADMIN_KEY.encode())], method=method)
    )

    assert answer.status == status
    assert answer.error()["code"] == code


async def test_a_too_large_body_is_a_413_with_a_code(make_gateway: GatewayFactory, upstream: FakeUpstream) -> None:
    gateway = await make_gateway(gateway_config(upstream, max_body_bytes=1024), ENV)
    body = b'{"model": "fake", "prompt": "' + b"x" * 4096 + b'"}'

    answer = await exchange(
        gateway.port or 0, request(headers=[(b"Authorization", f"Bearer {TEAM_KEY}".encode())], body=body)
    )

    assert answer.status == 413
    assert answer.error()["code"] == "request_too_large"


# --- slow clients -------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/v1/completions", "/admin/keys"])
async def test_a_stalled_body_gets_a_408_and_the_connection_is_closed(
    gateway: TestServer, caplog: pytest.LogCaptureFixture, path: str
) -> None:
    caplog.set_level(logging.DEBUG)
    key = TEAM_KEY if path == "/v1/completions" else ADMIN_KEY
    head = request(path, headers=[(b"Authorization", f"Bearer {key}".encode())]).partition(b"\r\n\r\n")[0]

    # Headers and part of the body, then nothing: the read returns once the server closes.
    answer = await exchange(gateway.port or 0, head + b"\r\n\r\n" + BODY[:10])

    assert answer.status == 408
    assert (answer.error()["code"], answer.error()["type"]) == ("request_timeout", "invalid_request_error")
    assert answer.headers.get("connection", "").lower() == "close"
    assert "Unhandled exception" not in caplog.text


async def test_trickled_headers_are_cut_off_with_a_408(gateway: TestServer) -> None:
    parts = [b"POST /v1/completions HTTP/1.1\r\n", b"Host: g\r\n", b"x-a: 1\r\n", b"x-b: 2\r\n", b"x-c: 3\r\n"]

    # One line every 0.3 s, never the blank line; the read returns once the server closes.
    answer = await exchange(gateway.port or 0, *parts, *[b"x-more: 1\r\n"] * 200, gap_s=0.3)

    assert answer.status == 408
    assert answer.error()["code"] == "request_timeout"


async def test_a_slow_but_steady_client_inside_the_limits_is_served(patient: TestServer) -> None:
    raw = request(headers=[(b"Authorization", f"Bearer {TEAM_KEY}".encode())])

    async def timed(_: asyncio.StreamReader) -> bytes:  # the first bytes arrived alone: the header timeout runs
        await until_the_server(patient, awaiting_headers)
        return b""

    answer = await exchange_in_turn(patient.port or 0, raw[:20], raw[20:], when=timed)

    assert answer.status == 200, answer.raw


async def test_an_idle_keep_alive_connection_is_not_cut_by_the_header_timeout(gateway: TestServer) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", gateway.port or 0)
    try:
        writer.write(b"GET /health HTTP/1.1\r\nHost: g\r\n\r\n")
        first = await reader.readuntil(b'"ok"}')
        await asyncio.sleep(1.2)  # idle: more than the header timeout, no byte of a next request
        writer.write(b"GET /health HTTP/1.1\r\nHost: g\r\nConnection: close\r\n\r\n")
        second = parse_answer(await asyncio.wait_for(reader.read(), 10))
    finally:
        writer.close()

    assert first.startswith(b"HTTP/1.1 200")
    assert second.status == 200


# --- `gateway serve`: the same, and nothing of the request on its stderr ----------------------


ROOT = Path(__file__).resolve().parents[2]


def start_serving(config_path: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(  # noqa: S603 - our own console script
        [str(GATEWAY), "serve", "-c", str(config_path), "--log-level", "DEBUG"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        # This checkout's code, whatever the virtualenv's editable install points at.
        env={**os.environ, **ENV, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)},
    )


@pytest.fixture
async def served(upstream: FakeUpstream, tmp_path: Path) -> AsyncIterator[tuple[int, subprocess.Popen[bytes]]]:
    port = free_port()
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(gateway_config(upstream, port=port, body_timeout_s=0.5, header_timeout_s=0.5)))
    process = start_serving(path)
    try:
        await wait_until_listening(port, process)
        yield port, process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            await asyncio.to_thread(process.wait, 10)


async def test_gateway_serve_answers_hostile_requests_and_logs_none_of_them(
    served: tuple[int, subprocess.Popen[bytes]],
) -> None:
    port, process = served
    answers = [await exchange(port, raw) for raw in PARSER_ERRORS.values()]
    bad_key = request(headers=[(b"Authorization", b"Bearer \xff" + CANARY_KEY.encode())])
    answers.append(await exchange(port, bad_key))
    unknown_key = request(headers=[(b"x-gateway-api-key", CANARY_KEY.encode())])
    answers.append(await exchange(port, unknown_key))
    stalled = request(headers=[(b"Authorization", f"Bearer {TEAM_KEY}".encode()), (b"x-canary", CANARY.encode())])
    answers.append(await exchange(port, stalled[: len(stalled) - len(BODY) + 5]))
    answers.append(
        await exchange(port, b"POST /v1/completions HTTP/1.1\r\n", AUTH + b"\r\n", *[b"x: 1\r\n"] * 100, gap_s=0.3)
    )

    process.send_signal(signal.SIGTERM)
    stdout, stderr = await asyncio.to_thread(process.communicate, None, 20)

    assert [answer.status for answer in answers] == [400] * len(PARSER_ERRORS) + [400, 401, 408, 408]
    for answer in answers:
        assert answer.content_type == "application/json"
        assert answer.error()["code"]
        assert CANARY.encode() not in answer.raw
    assert process.returncode == 0
    assert CANARY.encode() not in stdout + stderr, (stdout + stderr).decode(errors="replace")[-3000:]


# --- what escapes the app, and the log helpers ----------------------------------------------------


async def test_an_exception_outside_the_middleware_is_an_envelope_and_a_log_without_its_message(
    aiohttp_server: AiohttpServer, caplog: pytest.LogCaptureFixture
) -> None:
    """aiohttp answers what escapes the app itself (its own 500 page, text/plain): the gateway's
    protocol answers the envelope instead, and logs the exception's type and frames only."""
    caplog.set_level(logging.DEBUG)

    async def quoting(request: web.Request) -> web.Response:
        raise ValueError(f"cannot use {request.headers['Authorization']}")

    app = GatewayApplication(ServerConfig())
    app.router.add_get("/", quoting)
    server = await aiohttp_server(app)

    answer = await exchange(server.port or 0, request("/", [(b"Authorization", CANARY_BEARER)], method=b"GET"))

    assert answer.status == 500
    assert answer.content_type == "application/json"
    assert answer.error()["code"] == "internal_error"
    assert CANARY.encode() not in answer.raw
    assert "ValueError" in caplog.text
    assert CANARY not in caplog.text


def test_redact_hides_every_header_value_and_each_word_of_it() -> None:
    headers = [("Authorization", f"Bearer {CANARY_KEY}"), ("x-gateway-refresh-config", "true")]
    text = f"KeyError: 'Bearer {CANARY_KEY}'; token {CANARY_KEY!r}; escaped {CANARY_KEY + chr(1)!r}; true"

    redacted = redact(text, headers)

    assert CANARY not in redacted
    assert redacted.endswith("; true")  # values too short to be secrets are left alone


def test_exception_summary_keeps_types_and_frames_never_messages() -> None:
    try:
        try:
            raise KeyError(CANARY_KEY)
        except KeyError as inner:
            raise RuntimeError(f"while handling {CANARY_KEY}") from inner
    except RuntimeError as exc:
        summary = exception_summary(exc)

    assert "KeyError" in summary
    assert "RuntimeError" in summary
    assert "test_exception_summary_keeps_types_and_frames_never_messages" in summary
    assert CANARY not in summary
