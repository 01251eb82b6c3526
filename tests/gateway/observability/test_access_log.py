"""The access log: one JSON line per request, with where it went and how it ended, never a secret."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aiohttp import ClientSession

from tests.conftest import GatewayFactory, deployment
from tests.support.fake_upstream import FakeUpstream
from tests.support.observability_helpers import log_lines

CLIENT_KEY = "gw-client-key-0123456789abcdef"
PROVIDER_KEY = "sk-provider-secret-0123456789abcdefghij"


def logged(path: Path, **access_log: Any) -> dict[str, Any]:
    return {"access_log": {"path": str(path), **access_log}}


async def test_a_request_is_one_json_line_with_its_route_and_never_a_key(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession, tmp_path: Path
) -> None:
    path = tmp_path / "access.log"
    config = {
        "keys": [{"name": "team-a", "key": "${CLIENT_KEY}"}],
        "deployments": [
            deployment("fake", upstream.base_url, tags=["blue"], provider={"api_key": "${PROVIDER_KEY}"}),
            deployment("other", upstream.base_url),
        ],
        "observability": logged(path),
    }
    gateway = await make_gateway(config, {"CLIENT_KEY": CLIENT_KEY, "PROVIDER_KEY": PROVIDER_KEY})
    headers = {
        "Authorization": f"Bearer {CLIENT_KEY}",
        "x-gateway-deployment": "other",
        "x-gateway-tags": "blue, team:search status=500",
        "x-request-id": "trace-42",
    }
    async with http.post(
        gateway.make_url("/v1/completions"), json={"model": "x", "prompt": "hi"}, headers=headers
    ) as response:
        assert response.status == 200

    [line] = await log_lines(path, 1)
    assert line["request_id"] == "trace-42"
    assert (line["status"], line["deployment"], line["provider"], line["attempts"]) == (200, "other", "openai", 1)
    assert line["key"] == "team-a"
    assert line["tags"] == "blue,team:search status=500"  # the client's tags, a JSON string: no forged field
    assert line["ms"] > 0
    assert 0 <= line["overhead_ms"] <= line["ms"]
    assert line["upstream_ms"] > 0
    assert "prompt" not in line  # bodies are off by default
    text = path.read_text()
    assert CLIENT_KEY not in text
    assert PROVIDER_KEY not in text


async def test_a_failed_request_is_logged_with_its_status_and_error(
    make_gateway: GatewayFactory, http: ClientSession, tmp_path: Path
) -> None:
    path = tmp_path / "access.log"
    config = {"deployments": [deployment("down", "http://127.0.0.1:9/v1", retries=0)], "observability": logged(path)}
    gateway = await make_gateway(config)

    async with http.post(gateway.make_url("/v1/completions"), json={"model": "down", "prompt": "hi"}) as response:
        assert response.status == 502

    [line] = await log_lines(path, 1)
    assert (line["status"], line["deployment"], line["attempts"]) == (502, "down", 1)
    assert line["error"] == "upstream_unreachable"


async def test_a_stream_is_logged_with_its_time_to_first_token(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession, tmp_path: Path
) -> None:
    path = tmp_path / "access.log"
    gateway = await make_gateway(
        {"deployments": [deployment("fake", upstream.base_url)], "observability": logged(path)}
    )

    body = {"model": "fake", "prompt": "a b c", "stream": True}
    async with http.post(gateway.make_url("/v1/completions"), json=body) as response:
        assert (await response.read()).endswith(b"data: [DONE]\n\n")

    [line] = await log_lines(path, 1)
    assert line["stream"] is True
    assert 0 < line["ttft_ms"] <= line["ms"]


async def test_a_stream_replayed_from_the_cache_is_logged_with_its_time_to_first_token(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession, tmp_path: Path
) -> None:
    path = tmp_path / "access.log"
    config = {
        "deployments": [deployment("fake", upstream.base_url, policies=["cached"])],
        "policies": {"cached": {"cache": {}}},
        "observability": logged(path),
    }
    gateway = await make_gateway(config)

    body = {"model": "fake", "prompt": "a b c", "stream": True, "temperature": 0}
    for status in ("MISS", "HIT"):
        async with http.post(gateway.make_url("/v1/completions"), json=body) as response:
            assert response.headers["x-gateway-cache-status"] == status
            assert (await response.read()).endswith(b"data: [DONE]\n\n")

    _, replayed = await log_lines(path, 2)
    assert replayed["attempts"] == 0  # no upstream call: the stored stream
    assert 0 < replayed["ttft_ms"] <= replayed["ms"]


async def test_bodies_are_logged_only_when_enabled_and_then_with_pii_redacted(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession, tmp_path: Path
) -> None:
    path = tmp_path / "access.log"
    config = {
        "deployments": [deployment("fake", upstream.base_url)],
        "observability": logged(path, include_bodies=True),
    }
    gateway = await make_gateway(config)
    prompt = "mail jane.doe@example.com or call 415-555-0132 about the plan"

    async with http.post(gateway.make_url("/v1/completions"), json={"model": "fake", "prompt": prompt}) as response:
        assert response.status == 200

    [line] = await log_lines(path, 1)
    assert "about the plan" in line["prompt"]
    assert "about the plan" in line["completion"]
    text = path.read_text()
    assert "jane.doe@example.com" not in text
    assert "415-555-0132" not in text


async def test_the_text_format_keeps_one_key_value_line_that_a_header_cannot_forge(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession, tmp_path: Path
) -> None:
    path = tmp_path / "access.log"
    config = {"deployments": [deployment("fake", upstream.base_url)], "observability": logged(path, format="text")}
    gateway = await make_gateway(config)
    headers = {"x-gateway-deployment": "fake", "x-gateway-tags": "blue, team:search status=500"}

    async with http.post(
        gateway.make_url("/v1/completions"), json={"model": "fake", "prompt": "hi"}, headers=headers
    ) as response:
        assert response.status == 200

    [line] = await log_lines(path, 1, parse=False)
    assert " status=200 " in line
    assert " deployment=fake " in line
    assert "tags=blue,team:search_status_500" in line
    assert "status=500" not in line
