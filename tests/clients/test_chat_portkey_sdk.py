"""The `portkey-ai` SDK's chat call against the gateway: Portkey's own client, pointed at the
gateway's base URL with a gateway key in its `x-portkey-api-key` header, works unchanged."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import GatewayFactory, deployment
from tests.support.fake_upstream import FakeUpstream

portkey_ai = pytest.importorskip("portkey_ai")  # a dev extra: skipped where it is not installed

TEAM_KEY = "gw-team-key-0123456789abcdef"


async def test_portkey_chat_completions_create(make_gateway: GatewayFactory, upstream: FakeUpstream) -> None:
    config = {
        "keys": [{"name": "team", "key": "${TEAM_KEY}"}],
        "deployments": [deployment("fake", upstream.base_url)],
    }
    gateway = await make_gateway(config, {"TEAM_KEY": TEAM_KEY})
    client: Any = portkey_ai.AsyncPortkey(api_key=TEAM_KEY, base_url=str(gateway.make_url("/v1")))

    answer = await client.chat.completions.create(model="fake", messages=[{"role": "user", "content": "hi there"}])
    stream = await client.chat.completions.create(
        model="fake", messages=[{"role": "user", "content": "a b"}], stream=True
    )
    text = "".join([chunk.choices[0].delta.content or "" async for chunk in stream if chunk.choices])

    assert answer.choices[0].message.content == "echo: hi there"
    assert text == "echo: a b "
    assert [received.path for received in upstream.received] == ["/v1/chat/completions"] * 2
    assert "x-portkey-api-key" not in upstream.received[0].headers  # the gateway's key never goes upstream
