"""Every deployment that cannot serve says why: to the caller (503, or `x-gateway-skipped` when the
request falls back past it), in the access log, on /ready and on the status page; and an
unreachable upstream is named by its deployment and where it was looked for, never a credential."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import openai
import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer
from pytest_aiohttp import AiohttpServer

from tests.conftest import GatewayFactory, deployment
from tests.support import fake_upstream as fake
from tests.support.browser import headless_page
from tests.support.fake_upstream import FakeUpstream
from tests.support.observability_helpers import log_lines, once_redis_answers
from tests.support.routing_helpers import Upstreams, completion, post, sdk, start_gateway

OTHER_SECRET = "sk-other-SECRET-0123456789abcdef"  # a credential that IS set: it must never show
USER_SECRET = "pw-in-url-SECRET-42"
QUERY_SECRET = "query-SECRET-0987654321"
ROW = "document.querySelector('tr[data-deployment=\"{name}\"] td.{cell}')?.textContent"


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port  # nothing listens there once the probe is closed


def hosted_config(local_url: str, *, fallbacks: bool = True, **extra: Any) -> dict[str, Any]:
    """config.yaml's shape: `instruct` (virtual key on ${OPENAI_API_KEY}, unset) falling back to a local one,
    and `other`, whose credential ${OTHER_KEY} is set."""
    return {
        "virtual_keys": [{"name": "openai-main", "provider": "openai", "api_key": "${OPENAI_API_KEY}"}],
        "deployments": [
            {
                "name": "instruct",
                "aliases": ["gpt-3.5-turbo-instruct"],
                "tags": ["openai", "hosted"],
                "fallbacks": ["local-vllm"] if fallbacks else [],
                "provider": {"type": "openai", "base_url": "https://api.openai.com/v1", "virtual_key": "openai-main"},
            },
            deployment("local-vllm", local_url, tags=["local"], retries=0),
            deployment("other", local_url, provider={"api_key": "${OTHER_KEY}"}),
        ],
        **extra,
    }


ENV = {"OTHER_KEY": OTHER_SECRET}


def logged(path: Path, **access_log: Any) -> dict[str, Any]:
    return {"observability": {"access_log": {"path": str(path), **access_log}}}


def assert_no_secret(*texts: object) -> None:
    for text in texts:
        assert OTHER_SECRET not in str(text)


# --- the caller asked for a deployment that cannot serve ------------------------------------


@pytest.mark.parametrize(
    ("body", "headers"),
    [
        pytest.param(completion("any"), {"x-gateway-deployment": "instruct"}, id="deployment-header"),
        pytest.param(completion("instruct"), {}, id="body-model"),
        pytest.param(completion("gpt-3.5-turbo-instruct"), {}, id="alias-of-one-member-group"),
        pytest.param(completion("any"), {"x-gateway-deployment": "gpt-3.5-turbo-instruct"}, id="alias-in-header"),
    ],
)
async def test_a_deployment_without_its_credential_answers_503_naming_the_variable_to_set(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    http: ClientSession,
    body: dict[str, Any],
    headers: dict[str, str],
) -> None:
    gateway = await make_gateway(hosted_config(upstream.base_url, fallbacks=False), ENV)

    status, answer, response_headers = await post(http, gateway, body, headers)

    assert status == 503
    assert answer["error"]["code"] == "deployment_unavailable"
    assert answer["error"]["type"] == "service_unavailable"
    assert answer["error"]["message"] == (
        "Deployment 'instruct' cannot serve: its credential ${OPENAI_API_KEY} (virtual key 'openai-main') "
        "is not set on the gateway. Set OPENAI_API_KEY in the gateway's environment and restart it."
    )
    assert response_headers["x-gateway-skipped"] == "instruct=credential_unset"
    assert response_headers["x-gateway-attempts"] == "0"
    assert upstream.received == []
    assert_no_secret(answer, response_headers)


async def test_the_sdk_sees_the_503_with_the_variable_of_a_direct_api_key(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    config = {
        "deployments": [
            deployment("groq", upstream.base_url, provider={"api_key": "${GROQ_API_KEY}"}),
            deployment("other", upstream.base_url, provider={"api_key": "${OTHER_KEY}"}),
        ]
    }
    gateway = await make_gateway(config, ENV)

    async with sdk(gateway) as client:
        with pytest.raises(openai.InternalServerError) as refused:
            await client.completions.create(model="groq", prompt="hi")
        served = await client.completions.create(model="other", prompt="hi")

    assert refused.value.status_code == 503
    assert "Deployment 'groq' cannot serve: its credential ${GROQ_API_KEY} (provider.api_key)" in refused.value.message
    assert "Set GROQ_API_KEY" in refused.value.message
    assert served.choices[0].text == "echo: hi"  # the other deployment keeps serving, with its own key
    assert upstream.received[0].headers["Authorization"] == f"Bearer {OTHER_SECRET}"
    assert_no_secret(refused.value.message, refused.value.body)


async def test_when_every_candidate_cannot_serve_the_503_names_each_and_what_to_set(
    make_gateway: GatewayFactory, http: ClientSession
) -> None:
    config = {
        "deployments": [
            deployment("east", "http://127.0.0.1:9/v1", tags=["hosted"], provider={"api_key": "${EAST_KEY}"}),
            deployment("west", "http://127.0.0.1:9/v1", tags=["hosted"], provider={"api_key": "${WEST_KEY}"}),
            deployment("other", "http://127.0.0.1:9/v1", provider={"api_key": "${OTHER_KEY}"}),
        ]
    }
    gateway = await make_gateway(config, ENV)

    status, answer, headers = await post(http, gateway, completion("any"), {"x-gateway-tags": "hosted"})

    assert status == 503
    assert answer["error"]["code"] == "deployment_unavailable"
    message = answer["error"]["message"]
    assert message.startswith("No deployment for the tags 'hosted' can serve.")
    assert "Deployment 'east' cannot serve: its credential ${EAST_KEY}" in message
    assert "Deployment 'west' cannot serve: its credential ${WEST_KEY}" in message
    assert "Set EAST_KEY" in message
    assert "Set WEST_KEY" in message
    assert headers["x-gateway-skipped"] == "east=credential_unset, west=credential_unset"
    assert_no_secret(answer, headers)


# --- the gateway falls back past it: the skip is visible -------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({"x-gateway-deployment": "instruct"}, id="named"),
        pytest.param({"x-gateway-tags": "hosted"}, id="tags"),
    ],
)
async def test_falling_back_past_a_deployment_that_cannot_serve_says_so(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession, tmp_path: Path, headers: dict[str, str]
) -> None:
    path = tmp_path / "access.log"
    gateway = await make_gateway(hosted_config(upstream.base_url, **logged(path)), ENV)

    status, answer, response_headers = await post(http, gateway, completion("any", "fall back"), headers)

    assert status == 200
    assert answer["choices"][0]["text"] == "echo: fall back"
    assert response_headers["x-gateway-deployment"] == "local-vllm"
    assert response_headers["x-gateway-skipped"] == "instruct=credential_unset"
    assert response_headers["x-gateway-attempts"] == "1"
    [line] = await log_lines(path, 1)
    assert line["deployment"] == "local-vllm"
    assert line["skipped"] == {"instruct": "credential_unset"}
    assert_no_secret(answer, response_headers, path.read_text())


async def test_a_streamed_answer_from_the_fallback_carries_the_skip_too(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    gateway = await make_gateway(hosted_config(upstream.base_url), ENV)

    async with sdk(gateway, {"x-gateway-tags": "hosted"}) as client:
        raw = await client.completions.with_raw_response.create(model="any", prompt="a b", stream=True)
        text = "".join([chunk.choices[0].text async for chunk in raw.parse()])

    assert text.strip() == "echo: a b"
    assert raw.headers["x-gateway-deployment"] == "local-vllm"
    assert raw.headers["x-gateway-skipped"] == "instruct=credential_unset"


async def test_when_the_fallback_fails_too_the_answer_names_both_problems(
    make_gateway: GatewayFactory, http: ClientSession, tmp_path: Path
) -> None:
    path = tmp_path / "access.log"
    port = closed_port()
    gateway = await make_gateway(hosted_config(f"http://127.0.0.1:{port}/v1", **logged(path)), ENV)

    status, answer, headers = await post(http, gateway, completion("any"), {"x-gateway-deployment": "instruct"})

    assert status == 502
    assert answer["error"]["code"] == "upstream_unreachable"
    message = answer["error"]["message"]
    assert message.startswith(
        f"The upstream of deployment 'local-vllm' at http://127.0.0.1:{port}/v1 could not be reached "
        "(connection refused)."
    )
    assert "Deployment 'instruct' was skipped: its credential ${OPENAI_API_KEY}" in message
    assert "Set OPENAI_API_KEY" in message
    assert headers["x-gateway-deployment"] == "local-vllm"
    assert headers["x-gateway-skipped"] == "instruct=credential_unset"
    [line] = await log_lines(path, 1)
    assert (line["status"], line["deployment"], line["error"]) == (502, "local-vllm", "upstream_unreachable")
    assert line["skipped"] == {"instruct": "credential_unset"}


async def test_the_text_access_log_writes_the_skip_as_name_and_reason(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession, tmp_path: Path
) -> None:
    path = tmp_path / "access.log"
    gateway = await make_gateway(hosted_config(upstream.base_url, **logged(path, format="text")), ENV)

    status, _, _ = await post(http, gateway, completion("instruct"))

    assert status == 200
    [line] = await log_lines(path, 1, parse=False)
    assert " deployment=local-vllm " in line
    assert " skipped=instruct:credential_unset " in line


async def test_an_open_circuit_passed_over_is_reported_and_shown(
    http: ClientSession, aiohttp_server: AiohttpServer, tmp_path: Path
) -> None:
    upstreams = Upstreams(aiohttp_server)
    a, b = await upstreams.start_many("a", "b")
    path = tmp_path / "access.log"
    config = {
        "routing": {"breaker": {"consecutive_failures": 1, "cooldown_s": 3600}},
        "deployments": [
            deployment("a", a.base_url, retries=0, fallbacks=["b"]),
            deployment("b", b.base_url, retries=0),
        ],
        **logged(path),
    }
    gateway = await start_gateway(aiohttp_server, config)
    a.script(fake.status(500))

    first_status, _, first = await post(http, gateway, completion("a"))  # a fails: its circuit opens
    second_status, _, second = await post(http, gateway, completion("a"))  # a is passed over
    ready_status, ready = await get_json(http, gateway, "/ready")
    _, data = await get_json(http, gateway, "/dashboard/data")

    assert (first_status, first["x-gateway-deployment"]) == (200, "b")
    assert "x-gateway-skipped" not in first  # a was tried, not skipped
    assert (second_status, second["x-gateway-deployment"], second["x-gateway-attempts"]) == (200, "b", "1")
    assert second["x-gateway-skipped"] == "a=circuit_open"
    assert upstreams.calls == ["a", "b", "b"]
    lines = await log_lines(path, 2)
    assert "skipped" not in lines[0]
    assert lines[1]["skipped"] == {"a": "circuit_open"}
    assert ready_status == 200  # an open circuit can still serve (it is probed after its cooldown)
    assert ready["deployments"]["a"]["state"] == "circuit_open"
    assert ready["deployments"]["b"] == {"state": "ready", "provider": "openai"}
    assert rows(data)["a"]["state"] == "circuit_open"
    assert rows(data)["b"]["state"] == "ready"


# --- /ready and the status page list every deployment's state --------------------------------


async def get_json(http: ClientSession, gateway: TestServer, path: str) -> tuple[int, dict[str, Any]]:
    async with http.get(gateway.make_url(path)) as response:
        return response.status, await response.json()


def rows(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["name"]: row for row in data["deployments"]}


async def test_ready_lists_every_deployment_with_its_state_and_why(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession
) -> None:
    gateway = await make_gateway(hosted_config(upstream.base_url), ENV)

    status, body = await get_json(http, gateway, "/ready")

    assert status == 200
    assert body["status"] == "ready"
    assert body["redis"] == "not configured"
    assert body["config"] == "test-config.yaml"
    assert body["deployments"] == {
        "instruct": {
            "state": "unavailable",
            "provider": "openai",
            "reason": "Deployment 'instruct' cannot serve: its credential ${OPENAI_API_KEY} (virtual key "
            "'openai-main') is not set on the gateway. Set OPENAI_API_KEY in the gateway's environment and restart it.",
        },
        "local-vllm": {"state": "ready", "provider": "openai"},
        "other": {"state": "ready", "provider": "openai"},
    }
    assert_no_secret(body)


async def test_ready_is_503_when_no_deployment_can_serve_and_says_which_and_why(
    make_gateway: GatewayFactory, http: ClientSession, redis_url: str
) -> None:
    config = {
        "redis": {"url": redis_url},
        "deployments": [
            deployment("east", "http://127.0.0.1:9/v1", provider={"api_key": "${EAST_KEY}"}),
            deployment("west", "http://127.0.0.1:9/v1", provider={"api_key": "${WEST_KEY}"}),
        ],
    }
    gateway = await make_gateway(config)

    status, body = await once_redis_answers(http, str(gateway.make_url("/ready")))

    assert status == 503
    assert body["status"] == "not ready"
    assert body["redis"] == "ok"
    assert {name: state["state"] for name, state in body["deployments"].items()} == {
        "east": "unavailable",
        "west": "unavailable",
    }
    assert "Set EAST_KEY" in body["deployments"]["east"]["reason"]
    assert "Set WEST_KEY" in body["deployments"]["west"]["reason"]


async def test_the_status_page_data_shows_the_deployment_as_unavailable_with_its_reason(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession
) -> None:
    gateway = await make_gateway(hosted_config(upstream.base_url, fallbacks=False), ENV)
    refused, _, _ = await post(http, gateway, completion("instruct"))
    served, _, _ = await post(http, gateway, completion("local-vllm"))

    status, data = await get_json(http, gateway, "/dashboard/data")

    assert (refused, served, status) == (503, 200, 200)
    instruct, local = rows(data)["instruct"], rows(data)["local-vllm"]
    assert instruct["state"] == "unavailable"  # not a green closed circuit
    assert "${OPENAI_API_KEY}" in instruct["reason"]
    assert "Set OPENAI_API_KEY" in instruct["reason"]
    assert instruct["requests"] == 1  # its 503s count against it
    assert instruct["errors"] == 1
    assert local["state"] == "ready"
    assert local["reason"] is None
    assert rows(data)["other"]["state"] == "ready"
    assert_no_secret(data)


# --- an unreachable upstream is named by where it was looked for ------------------------------


def provider_block(kind: str, root: str) -> dict[str, Any]:
    """A provider of `kind` whose upstream lives at `root` (scheme://host:port)."""
    if kind == "azure":
        return {"type": "azure", "endpoint": root, "azure_deployment": "instruct"}
    if kind in ("openai", "openai-chat"):
        return {"type": kind, "base_url": f"{root}/v1"}
    return {"type": kind, "base_url": root, "model": "m"}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("kind", ["openai", "azure", "openai-chat", "anthropic", "gemini"])
async def test_an_unreachable_upstream_is_a_502_naming_the_deployment_and_its_url(
    make_gateway: GatewayFactory, http: ClientSession, kind: str, stream: bool
) -> None:
    root = f"http://127.0.0.1:{closed_port()}"
    provider = {**provider_block(kind, root), "api_key": "${OTHER_KEY}"}
    gateway = await make_gateway({"deployments": [{"name": "far", "provider": provider, "retries": 0}]}, ENV)

    status, answer, headers = await post(http, gateway, completion("far", stream=stream))

    assert status == 502
    assert answer["error"]["code"] == "upstream_unreachable"
    shown = root if kind in ("azure", "anthropic", "gemini") else f"{root}/v1"
    assert answer["error"]["message"] == (
        f"The upstream of deployment 'far' at {shown} could not be reached (connection refused)."
    )
    assert headers["x-gateway-deployment"] == "far"
    assert_no_secret(answer, headers)


async def test_the_url_in_the_message_has_no_userinfo_and_no_query(
    make_gateway: GatewayFactory, http: ClientSession, tmp_path: Path
) -> None:
    port = closed_port()
    path = tmp_path / "access.log"
    url = f"http://gateway:{USER_SECRET}@127.0.0.1:{port}/v1/?api-key={QUERY_SECRET}"
    gateway = await make_gateway({"deployments": [deployment("far", url, retries=0)], **logged(path)})

    status, answer, _ = await post(http, gateway, completion("far"))

    assert status == 502
    message = answer["error"]["message"]
    assert f"deployment 'far' at http://127.0.0.1:{port}/v1 could not be reached" in message
    await log_lines(path, 1)
    for secret in (USER_SECRET, QUERY_SECRET, "gateway:"):
        assert secret not in message
        assert secret not in path.read_text()


async def test_a_timeout_is_a_504_naming_the_deployment_and_its_url(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession
) -> None:
    gateway = await make_gateway({"deployments": [deployment("slow", upstream.base_url, timeout_s=0.2, retries=0)]})
    upstream.script(fake.stall(10.0))

    status, answer, _ = await post(http, gateway, completion("slow"))

    assert status == 504
    assert answer["error"]["code"] == "upstream_timeout"
    assert (
        answer["error"]["message"]
        == f"The upstream of deployment 'slow' at {upstream.base_url} did not answer within 0.2 s."
    )


async def test_the_status_page_shows_the_deployment_as_unavailable_and_why(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession, tmp_path: Path
) -> None:
    gateway = await make_gateway(hosted_config(upstream.base_url, fallbacks=False), ENV)
    served, _, _ = await post(http, gateway, completion("local-vllm"))

    async with headless_page(tmp_path / "profile") as page:
        await page.goto(str(gateway.make_url("/dashboard")))
        state = await page.wait_for(ROW.format(name="instruct", cell="circuit"))
        reason = await page.evaluate("document.querySelector('tr[data-reason-for=\"instruct\"]')?.textContent")
        local = await page.evaluate(ROW.format(name="local-vllm", cell="circuit"))

    assert served == 200
    assert state == "unavailable"  # not a green closed circuit
    assert "cannot serve: its credential ${OPENAI_API_KEY}" in reason
    assert "Set OPENAI_API_KEY" in reason
    assert local == "closed"
