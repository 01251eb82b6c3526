"""A gateway with the console on (an admin key, a viewer key, the mock deployment, a real Redis),
and a client that signs in over real HTTP and carries the session cookie by hand."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aiohttp import ClientSession
from aiohttp.test_utils import TestServer

ADMIN_KEY = "console-admin-key-7Hq2Lx9Vb4Nm8Rt3Wz"
VIEWER_KEY = "console-viewer-key-Pk5Jd8Qs2Xc6Yf1Gh"
ENV = {"ADMIN_KEY": ADMIN_KEY, "VIEWER_KEY": VIEWER_KEY}
COOKIE = "gateway_console"
CSRF_HEADER = "x-gateway-csrf"
PRICE = {"prompt_per_1m": 1000.0, "completion_per_1m": 2000.0}  # a cent a prompt word: spend that shows


def console_config(redis: dict[str, str], **admin: Any) -> dict[str, Any]:
    return {
        "redis": redis,
        "admin": {"key": "${ADMIN_KEY}", "viewer_keys": [{"name": "auditor", "key": "${VIEWER_KEY}"}], **admin},
        "deployments": [{"name": "mock", "provider": {"type": "mock"}, "price": PRICE}],
    }


@dataclass
class Signed:
    """A signed-in console session: its cookie and its CSRF token."""

    gateway: TestServer
    http: ClientSession
    cookie: str
    csrf: str
    answer: dict[str, Any] = field(default_factory=dict)

    def headers(self, csrf: str | None = None) -> dict[str, str]:
        headers = {"Cookie": f"{COOKIE}={self.cookie}"}
        if csrf is not None:
            headers[CSRF_HEADER] = csrf
        return headers

    async def call(
        self, method: str, path: str, *, csrf: str | None = None, json: Any = None
    ) -> tuple[int, dict[str, Any]]:
        async with self.http.request(
            method, self.gateway.make_url(path), headers=self.headers(csrf), json=json
        ) as response:
            return response.status, await response.json(content_type=None)


async def sign_in(http: ClientSession, gateway: TestServer, key: str) -> Signed:
    async with http.post(gateway.make_url("/admin/session"), json={"key": key}) as response:
        answer = await response.json()
        assert response.status == 200, answer
        morsel = response.cookies[COOKIE]
    return Signed(gateway, http, morsel.value, answer["csrf_token"], answer)
