"""No secret ever leaves, and no credential follows a redirect.

Random credentials (canaries) are configured everywhere the gateway keeps one: each deployment's
`api_key` (from the environment), virtual keys from the config and from the Redis store, the
callers' gateway keys (one from `keys:` by environment variable, one known only by its SHA-256),
the admin and metrics keys. Every HTTP provider type runs against a loopback upstream that
echoes them back in every way it can: whole, masked (`sk-a****wxyz`), as fragments, in another
letter case, in `message`, `param`, `code` and `type`, straddling byte 300 of a text/plain body, in a
5xx body, in a stream's error event, in a redirect's Location. Then every response body and
header, every access log line, everything logged, and a /metrics scrape are searched for any 8
characters in a row of any canary (in any case) and for masked echoes: none may be there. Tracing is
on (with content captured), and every span exported to a loopback OTLP receiver is searched too.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import secrets
import string
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis
from aiohttp import ClientSession, web
from aiohttp.test_utils import TestServer
from pytest_aiohttp import AiohttpServer

from gateway.keys.vault import Vault, generate_encryption_key
from gateway.keys.virtual_store import RedisVirtualKeyStore
from tests.conftest import GatewayFactory
from tests.support.observability_helpers import log_lines
from tests.support.otlp_receiver import OtlpReceiver
from tests.support.redis_helpers import redis_client

TYPES = ("openai", "azure", "openai-chat", "anthropic", "gemini")
_ALPHABET = string.ascii_letters + string.digits


def canary(prefix: str = "sk-") -> str:
    return prefix + "".join(secrets.choice(_ALPHABET) for _ in range(40))


@dataclass
class Canaries:
    deployment: dict[str, str] = field(default_factory=lambda: {t: canary() for t in TYPES})
    config_virtual: dict[str, str] = field(default_factory=lambda: {t: canary() for t in TYPES})
    store_virtual: dict[str, str] = field(default_factory=lambda: {t: canary() for t in TYPES})
    caller_env: str = field(default_factory=lambda: canary("gw-"))
    caller_hashed: str = field(default_factory=lambda: canary("gw-"))
    admin: str = field(default_factory=lambda: canary("adm-"))
    metrics: str = field(default_factory=lambda: canary("met-"))

    def in_config(self) -> list[str]:
        """What the gateway can know from its config alone."""
        return [*self.deployment.values(), *self.config_virtual.values(), self.caller_env, self.admin, self.metrics]

    def every(self) -> list[str]:
        return [*self.in_config(), *self.store_virtual.values(), self.caller_hashed]


def echoes(secret: str) -> list[str]:
    """Every way an upstream might quote a credential back."""
    return [
        secret,
        f"{secret[:4]}****{secret[-4:]}",  # first4****last4
        f"{secret[:7]}{'*' * 20}…{secret[-4:]}",  # OpenAI's "Incorrect API key provided: sk-abc1****…wxyz"
        f"…{secret[-5:]}",
        secret[5:17],  # a fragment
        secret.lower(),
        secret.upper(),
    ]


def quoted(leaks: list[str]) -> str:
    return " | ".join(f"Incorrect API key provided: {echo}" for secret in leaks for echo in echoes(secret))


def straddling(leaks: list[str]) -> bytes:
    """A text body whose first credential straddles byte 300 (where a cut-then-scrub would leave a fragment)."""
    return b"e" * 290 + f"{leaks[0]} {quoted(leaks)}".encode()


# -- the upstream: every provider's API on one loopback server, echoing what it knows --------------


def sse(event: dict[str, Any], kind: str | None = None) -> bytes:
    head = f"event: {kind}\n".encode() if kind else b""
    return head + b"data: " + orjson.dumps(event) + b"\n\n"


def error_fields(leaks: list[str]) -> dict[str, Any]:
    """An OpenAI-shaped error object quoting the credentials in each of its fields."""
    return {
        "message": quoted(leaks),
        "type": f"{leaks[0]} {echoes(leaks[0])[1]}",
        "param": f"{echoes(leaks[0])[2]} {leaks[-1]}",
        "code": f"{echoes(leaks[0])[4]}-{leaks[0]}",
    }


def error_body(provider: str, leaks: list[str], status: int) -> dict[str, Any]:
    fields = error_fields(leaks)
    if provider == "anthropic":
        return {"type": "error", "error": fields}
    if provider == "gemini":
        return {"error": {"code": status, "message": fields["message"], "status": fields["type"]}}
    return {"error": fields}


def first_event(provider: str) -> bytes:
    """An event of the API's stream carrying some text: the stream has started for the client."""
    if provider == "anthropic":
        start = {"type": "message_start", "message": {"usage": {"input_tokens": 1}}}
        delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hello"}}
        return sse(start, "message_start") + sse(delta, "content_block_delta")
    if provider == "gemini":
        return sse({"candidates": [{"content": {"parts": [{"text": "Hello"}], "role": "model"}, "index": 0}]})
    if provider == "openai-chat":
        choice = {"index": 0, "delta": {"content": "Hello"}, "finish_reason": None}
        return sse({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [choice]})
    choice = {"text": "Hello", "index": 0, "logprobs": None, "finish_reason": None}
    return sse({"id": "c", "object": "text_completion", "created": 1, "model": "m", "choices": [choice]})


def error_event(provider: str, leaks: list[str]) -> bytes:
    if provider == "anthropic":
        return sse({"type": "error", "error": {"type": "overloaded_error", "message": quoted(leaks)}}, "error")
    return sse(error_body(provider, leaks, 500))


def provider_of(path: str) -> str:
    if path.startswith("/openai/deployments/"):
        return "azure"
    if path.endswith("/chat/completions"):
        return "openai-chat"
    if path.endswith("/messages"):
        return "anthropic"
    if ":generateContent" in path or ":streamGenerateContent" in path:
        return "gemini"
    return "openai"


@dataclass
class EchoUpstream:
    scenario: str = "json-4xx"
    also_known: list[str] = field(default_factory=list)  # what it quotes besides the credential it got
    trap_url: str = ""
    credentials: list[str] = field(default_factory=list)  # each call's credential, as received
    first_text_seen: asyncio.Event = field(default_factory=asyncio.Event)  # by the client, in this call
    base_url: str = ""

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("POST", "/{tail:.*}", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.StreamResponse:
        await request.read()
        headers = request.headers
        bearer = headers.get("Authorization", "").removeprefix("Bearer ")
        credential = bearer or headers.get("api-key") or headers.get("x-api-key") or headers.get("x-goog-api-key")
        assert credential, "every call carries its credential"
        self.credentials.append(credential)
        provider = provider_of(request.path)
        leaks = [credential, *self.also_known]
        scenario = self.scenario
        if scenario == "json-4xx":
            return web.json_response(error_body(provider, leaks, 400), status=400)
        if scenario in ("text-4xx", "text-5xx"):
            status = 400 if scenario == "text-4xx" else 500
            return web.Response(status=status, body=straddling(leaks), content_type="text/plain")
        if scenario == "stream-error":
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await response.prepare(request)
            await response.write(first_event(provider))
            await asyncio.wait_for(self.first_text_seen.wait(), 30)  # the stream has started for the client
            await response.write(error_event(provider, leaks))
            return response
        status_text, where = scenario.split(":", 1)  # "redirect-307:trap" or "redirect-302:host"
        status = int(status_text.removeprefix("redirect-"))
        if where == "trap":  # the credentials in userinfo, path and query, to a server that records visits
            location = f"{self.trap_url.replace('://', f'://{leaks[1][:20]}:{credential}@')}/steal/{credential}"
            location += f"?key={credential}&masked={echoes(credential)[1]}"
        else:  # a host named after the credential
            location = f"https://{credential.lower()}.invalid:8443/v1/completions"
        return web.Response(status=status, headers={"Location": location})


@dataclass
class Trap:
    """Where redirects point: it must never be called."""

    visits: list[str] = field(default_factory=list)
    url: str = ""

    def app(self) -> web.Application:
        async def visit(request: web.Request) -> web.Response:
            self.visits.append(f"{request.method} {request.path_qs} {dict(request.headers)}")
            return web.json_response({"stolen": True})

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", visit)
        return app


# -- the gateway -----------------------------------------------------------------------------------


@dataclass
class World:
    gateway: TestServer
    upstream: EchoUpstream
    trap: Trap
    canaries: Canaries
    access_log: Path
    http: ClientSession
    spans: OtlpReceiver
    seen: list[str] = field(default_factory=list)  # every response body and header, as the client got them
    requests: int = 0

    async def complete(
        self, provider: str, *, stream: bool, caller: str, virtual_key: str | None = None
    ) -> tuple[int, bytes, dict[str, str]]:
        headers = {"Authorization": f"Bearer {caller}"}
        if virtual_key is not None:
            headers["x-gateway-virtual-key"] = virtual_key
        # The upstream "knows" the config's credentials and this caller's key, as a leaky upstream might.
        self.upstream.also_known = [*self.canaries.in_config(), caller]
        body = {"model": f"canary-{provider}", "prompt": "Say hello", "max_tokens": 5, "stream": stream}
        self.upstream.first_text_seen = seen = asyncio.Event()
        raw = b""
        async with self.http.post(self.gateway.make_url("/v1/completions"), json=body, headers=headers) as response:
            async for read in response.content.iter_any():
                raw += read
                if b"data: " in raw:
                    seen.set()
            got = dict(response.headers)
        self.requests += 1
        self.seen += [raw.decode("utf-8", "replace"), repr(got)]
        return response.status, raw, got

    async def everything_written(self, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> str:
        """Responses, access log lines, logs, captured output and a /metrics scrape, as one text."""
        lines = await log_lines(self.access_log, self.requests, parse=False)
        url = self.gateway.make_url("/metrics")
        async with self.http.get(url, headers={"Authorization": f"Bearer {self.canaries.metrics}"}) as response:
            assert response.status == 200
            scrape = await response.text()
        assert "gateway_upstream_errors_total" in scrape
        await self.spans.wait_for(self.requests)  # a server span per request, at least
        captured = capfd.readouterr()
        spans = self.spans.text()
        return "\n".join([*self.seen, *lines, caplog.text, captured.out, captured.err, scrape, spans])


def canary_config(
    canaries: Canaries, upstream: EchoUpstream, redis: dict[str, str], log: Path, retries: int, traces: str
) -> dict[str, Any]:
    base = upstream.base_url
    blocks = {
        "openai": {"type": "openai", "base_url": f"{base}/v1"},
        "azure": {"type": "azure", "endpoint": base, "azure_deployment": "instruct"},
        "openai-chat": {"type": "openai-chat", "base_url": f"{base}/v1", "model": "chat-model"},
        "anthropic": {"type": "anthropic", "base_url": base, "model": "claude-model"},
        "gemini": {"type": "gemini", "base_url": base, "model": "gemini-model"},
    }
    every_virtual = [f"{source}-{t}" for source in ("cfg", "store") for t in TYPES]
    return {
        "redis": redis,
        "admin": {"key": "${ADMIN_KEY}"},
        "keys": [
            {"name": "env-caller", "key": "${CALLER_KEY}", "virtual_keys": every_virtual},
            {
                "name": "hashed-caller",
                "sha256": hashlib.sha256(canaries.caller_hashed.encode()).hexdigest(),
                "virtual_keys": every_virtual,
            },
        ],
        "virtual_keys": [{"name": f"cfg-{t}", "provider": t, "api_key": f"${{CFG_{_env(t)}}}"} for t in TYPES],
        "deployments": [
            {
                "name": f"canary-{t}",
                "provider": {**blocks[t], "api_key": f"${{DEPLOY_{_env(t)}}}"},
                "timeout_s": 30,  # the fakes answer at once (or once the client has the stream's start)
                "retries": retries,
            }
            for t in TYPES
        ],
        "observability": {
            "access_log": {"path": str(log)},
            "metrics": {"key": "${METRICS_KEY}"},
            "tracing": {"enabled": True, "endpoint": traces, "capture_content": True},
        },
    }


def canary_env(canaries: Canaries) -> dict[str, str]:
    env = {"ADMIN_KEY": canaries.admin, "CALLER_KEY": canaries.caller_env, "METRICS_KEY": canaries.metrics}
    for t in TYPES:
        env[f"DEPLOY_{_env(t)}"] = canaries.deployment[t]
        env[f"CFG_{_env(t)}"] = canaries.config_virtual[t]
    return env


def _env(provider: str) -> str:
    return provider.upper().replace("-", "_")


StartWorld = Callable[..., Awaitable[World]]


@pytest.fixture
async def start_world(
    make_gateway: GatewayFactory,
    aiohttp_server: AiohttpServer,
    http: ClientSession,
    redis_url: str,
    redis_settings: dict[str, str],
    redis_prefix: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> StartWorld:
    async def start(retries: int = 0) -> World:
        canaries = Canaries()
        encryption_key = generate_encryption_key()
        monkeypatch.setenv("GATEWAY_ENCRYPTION_KEY", encryption_key)
        async with redis_client(redis_url) as client:
            await _store_virtual_keys(client, redis_prefix, encryption_key, canaries)
        trap = Trap()
        trap.url = str((await aiohttp_server(trap.app())).make_url("")).rstrip("/")
        upstream = EchoUpstream(trap_url=trap.url)
        upstream.base_url = str((await aiohttp_server(upstream.app())).make_url("")).rstrip("/")
        log = tmp_path / "access.log"
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "20")
        spans = OtlpReceiver()
        spans.url = str((await aiohttp_server(spans.app())).make_url("")).rstrip("/")
        config = canary_config(canaries, upstream, redis_settings, log, retries, spans.url)
        gateway = await make_gateway(config, canary_env(canaries))
        return World(gateway, upstream, trap, canaries, log, http, spans)

    return start


async def _store_virtual_keys(client: aioredis.Redis, prefix: str, encryption_key: str, canaries: Canaries) -> None:
    store = RedisVirtualKeyStore(client, prefix, Vault([encryption_key]))
    for t in TYPES:
        assert await store.create(f"store-{t}", t, canaries.store_virtual[t]) is not None


# -- what must hold --------------------------------------------------------------------------------


def leaks_in(text: str, canaries: list[str]) -> list[str]:
    """Each canary of which `text` holds 8 characters in a row (any case), or a masked echo."""
    folded = text.lower()
    found = []
    for secret in canaries:
        low = secret.lower()
        windows = [low[i : i + 8] for i in range(len(low) - 7)]
        hit = next((w for w in windows if w in folded), None)
        if hit is None:
            head, tail = re.escape(low[:4]), re.escape(low[-4:])
            masked = re.search(f"{head}[*…•.]|[*…•]{tail}", folded)
            hit = masked.group() if masked else None
        if hit is not None:
            at = folded.index(hit)
            found.append(f"{secret[:6]}… as {hit!r} in …{text[max(0, at - 60) : at + 60]!r}…")
    return found


def callers(canaries: Canaries, provider: str) -> list[tuple[str, str | None]]:
    """(caller's key, virtual key named): the deployment's own credential for the caller known
    from the config; a virtual key from the config, then one from Redis, for the caller the gateway
    knows only by hash."""
    return [
        (canaries.caller_env, None),
        (canaries.caller_hashed, f"cfg-{provider}"),
        (canaries.caller_hashed, f"store-{provider}"),
    ]


def error_of(raw: bytes) -> dict[str, Any]:
    envelope = orjson.loads(raw)
    assert set(envelope["error"]) == {"message", "type", "param", "code"}
    error: dict[str, Any] = envelope["error"]
    return error


def last_event(raw: bytes) -> dict[str, Any]:
    frames = [frame for frame in raw.split(b"\n\n") if frame.startswith(b"data: ")]
    assert b"data: [DONE]" not in frames
    assert len(frames) >= 2, raw  # some text reached the client before the failure
    event: dict[str, Any] = orjson.loads(frames[-1][6:])
    return event


@pytest.mark.parametrize("provider", TYPES)
@pytest.mark.parametrize("scenario", ["json-4xx", "text-4xx", "text-5xx", "stream-error"])
async def test_no_canary_leaves_through_an_upstream_failure(
    start_world: StartWorld,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    provider: str,
    scenario: str,
) -> None:
    caplog.set_level(logging.DEBUG)
    world = await start_world()
    world.upstream.scenario = scenario
    canaries = world.canaries

    for caller, virtual_key in callers(canaries, provider):
        for stream in (False, True) if scenario != "stream-error" else (True,):
            status, raw, _ = await world.complete(provider, stream=stream, caller=caller, virtual_key=virtual_key)
            if scenario == "stream-error":
                assert status == 200
                error = last_event(raw)["error"]
                assert error["code"] == "upstream_stream_error"
                assert f"'canary-{provider}'" in error["message"]
            else:
                assert status == (502 if scenario == "text-5xx" else 400), raw
                error = error_of(raw)
            assert "[redacted]" in error["message"]  # the echo reached the gateway, and was scrubbed

    sent = {canaries.deployment[provider], canaries.config_virtual[provider], canaries.store_virtual[provider]}
    assert set(world.upstream.credentials) == sent  # the upstream was called with each, and quoted it
    written = await world.everything_written(capfd, caplog)
    assert leaks_in(written, canaries.every()) == []


@pytest.mark.parametrize("provider", TYPES)
async def test_an_upstream_redirect_is_not_followed_and_names_the_deployment(
    start_world: StartWorld, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture, provider: str
) -> None:
    caplog.set_level(logging.DEBUG)
    world = await start_world(retries=2)
    canaries = world.canaries

    for status in (302, 307, 308):
        for where in ("trap", "host"):
            world.upstream.scenario = f"redirect-{status}:{where}"
            for stream in (False, True):
                for caller, virtual_key in callers(canaries, provider):
                    code, raw, headers = await world.complete(
                        provider, stream=stream, caller=caller, virtual_key=virtual_key
                    )
                    assert code == 502, raw
                    error = error_of(raw)
                    assert error["code"] == "upstream_redirect"
                    assert f"deployment 'canary-{provider}'" in error["message"]
                    assert f"HTTP {status}" in error["message"]
                    if where == "trap":  # the target's origin only: scheme://host:port
                        assert f"a redirect to {world.trap.url}." in error["message"]
                    assert headers["x-gateway-attempts"] == "1"  # not retried: it would redirect again

    assert world.trap.visits == []  # no credential, nor anything else, went where the upstream pointed
    written = await world.everything_written(capfd, caplog)
    assert leaks_in(written, canaries.every()) == []
