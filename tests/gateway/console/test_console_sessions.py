"""Console sessions over real HTTP: the cookie's properties, CSRF on every change, read-only
viewers, forged and ended sessions, and the admin API's failure throttle shared with signing in."""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest
from aiohttp import ClientSession, web
from aiohttp.test_utils import TestClient
from pydantic import SecretStr
from pytest_aiohttp import AiohttpClient

from gateway.console.gate import ConsoleSessions
from gateway.keys.admin import AdminServices, admin_app
from gateway.keys.directory import KeyDirectory
from gateway.keys.virtual import VirtualKeys
from tests.conftest import GatewayFactory
from tests.support.console_helpers import ADMIN_KEY, COOKIE, ENV, VIEWER_KEY, console_config, sign_in

ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}


async def key_names(http: ClientSession, gateway: Any) -> list[str]:
    async with http.get(gateway.make_url("/admin/keys"), headers=ADMIN) as response:
        assert response.status == 200
        return [record["name"] for record in (await response.json())["data"]]


async def test_signing_in_sets_a_strict_httponly_expiring_cookie_scoped_to_the_admin_api(
    make_gateway: GatewayFactory, redis_settings: dict[str, str], http: ClientSession
) -> None:
    gateway = await make_gateway(console_config(redis_settings, session_ttl_s=900), ENV)
    async with http.post(gateway.make_url("/admin/session"), json={"key": ADMIN_KEY}) as response:
        assert response.status == 200
        answer = await response.json()
        morsel = response.cookies[COOKIE]
    assert answer["role"] == "admin"
    assert answer["csrf_token"]
    assert ADMIN_KEY not in morsel.value
    assert ADMIN_KEY not in orjson.dumps(answer).decode()
    assert morsel["httponly"] is True
    assert morsel["samesite"] == "Strict"
    assert morsel["path"] == "/admin"
    assert morsel["max-age"] == "900"
    assert not morsel["secure"]  # plain HTTP here; over TLS it is Secure (below)
    signed = await sign_in(http, gateway, ADMIN_KEY)
    status, who = await signed.call("GET", "/admin/session")
    assert status == 200
    assert who["role"] == "admin"
    assert who["csrf_token"] == signed.csrf


async def test_a_change_needs_the_sessions_csrf_token_and_a_forged_one_changes_nothing(
    make_gateway: GatewayFactory, redis_settings: dict[str, str], http: ClientSession
) -> None:
    gateway = await make_gateway(console_config(redis_settings), ENV)
    signed = await sign_in(http, gateway, ADMIN_KEY)
    other = await sign_in(http, gateway, ADMIN_KEY)  # another session's token is a forged one here
    for csrf, expected in [(None, 403), ("forged-token", 403), (other.csrf, 403), ("", 403)]:
        status, body = await signed.call("POST", "/admin/keys", csrf=csrf, json={"name": "made-by-csrf"})
        assert status == expected, body
        assert body["error"]["code"] == "csrf_failed"
    async with http.post(gateway.make_url("/admin/keys"), json={"name": "no-session"}) as response:
        assert response.status == 401  # no session, no key: nothing is changed either
    assert await key_names(http, gateway) == []
    status, body = await signed.call("POST", "/admin/keys", csrf=signed.csrf, json={"name": "made-in-console"})
    assert status == 201
    assert body["key"].startswith("gw-")
    status, _ = await signed.call("POST", "/admin/keys/made-in-console/revoke", csrf=signed.csrf)
    assert status == 200
    assert await key_names(http, gateway) == ["made-in-console"]


async def test_a_viewer_reads_but_changes_nothing_by_key_or_by_session(
    make_gateway: GatewayFactory, redis_settings: dict[str, str], http: ClientSession
) -> None:
    gateway = await make_gateway(console_config(redis_settings), ENV)
    viewer = {"Authorization": f"Bearer {VIEWER_KEY}"}
    async with http.get(gateway.make_url("/admin/keys"), headers=viewer) as response:
        assert response.status == 200
    async with http.post(gateway.make_url("/admin/keys"), headers=viewer, json={"name": "by-viewer"}) as response:
        assert response.status == 403
        assert (await response.json())["error"]["code"] == "read_only_viewer"
    signed = await sign_in(http, gateway, VIEWER_KEY)
    assert signed.answer["role"] == "viewer"
    assert signed.answer["name"] == "auditor"
    assert (await signed.call("GET", "/admin/deployments"))[0] == 200
    for method, path in [("POST", "/admin/keys"), ("PATCH", "/admin/keys/x"), ("DELETE", "/admin/keys/x")]:
        status, body = await signed.call(method, path, csrf=signed.csrf, json={"name": "by-viewer-session"})
        assert status == 403, (method, path, body)
        assert body["error"]["type"] == "permission_error"
    assert await key_names(http, gateway) == []
    status, _ = await signed.call("DELETE", "/admin/session", csrf=signed.csrf)  # signing out is theirs to do
    assert status == 200


async def test_a_forged_cookie_is_refused_and_counted_against_the_admin_throttle(
    make_gateway: GatewayFactory, redis_settings: dict[str, str], http: ClientSession
) -> None:
    gateway = await make_gateway(console_config(redis_settings), ENV)
    signed = await sign_in(http, gateway, VIEWER_KEY)
    payload, _, mac = signed.cookie.partition(".")
    fields = orjson.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    fields[1] = "admin"  # a viewer who makes itself an admin
    raised = base64.urlsafe_b64encode(orjson.dumps(fields)).rstrip(b"=").decode()
    signed.cookie = f"{raised}.{mac}"
    status, body = await signed.call("POST", "/admin/keys", csrf=signed.csrf, json={"name": "escalated"})
    assert status == 401
    assert body["error"]["code"] == "invalid_session"
    for _ in range(4):
        await signed.call("GET", "/admin/keys")
    async with http.get(gateway.make_url("/admin/keys"), headers=ADMIN) as response:
        assert response.status == 429  # five failures from this address: even the right key waits


async def test_wrong_sign_ins_share_the_admin_apis_throttle(
    make_gateway: GatewayFactory, redis_settings: dict[str, str], http: ClientSession
) -> None:
    gateway = await make_gateway(console_config(redis_settings), ENV)
    for _ in range(5):
        async with http.post(gateway.make_url("/admin/session"), json={"key": "guess-" + "x" * 30}) as response:
            assert response.status == 401
    async with http.post(gateway.make_url("/admin/session"), json={"key": ADMIN_KEY}) as response:
        assert response.status == 429  # the right key, too late: refused before it is looked at
        assert COOKIE not in response.cookies


async def test_signing_in_takes_json_only(
    make_gateway: GatewayFactory, redis_settings: dict[str, str], http: ClientSession
) -> None:
    """A cross-site form could post urlencoded or text/plain without a preflight: refused."""
    gateway = await make_gateway(console_config(redis_settings), ENV)
    async with http.post(gateway.make_url("/admin/session"), data={"key": ADMIN_KEY}) as response:
        assert response.status == 415
        assert (await response.json())["error"]["code"] == "unsupported_media_type"
        assert COOKIE not in response.cookies
    async with http.post(gateway.make_url("/admin/session"), json={"key": 42}) as response:
        assert response.status == 400
        assert (await response.json())["error"]["param"] == "key"


async def test_signing_out_needs_the_csrf_token_and_then_clears_the_cookie(
    make_gateway: GatewayFactory, redis_settings: dict[str, str], http: ClientSession
) -> None:
    gateway = await make_gateway(console_config(redis_settings), ENV)
    signed = await sign_in(http, gateway, ADMIN_KEY)
    assert (await signed.call("DELETE", "/admin/session", csrf="forged"))[0] == 403
    assert (await signed.call("GET", "/admin/keys"))[0] == 200  # still signed in
    async with http.delete(gateway.make_url("/admin/session"), headers=signed.headers(signed.csrf)) as response:
        assert response.status == 200
        cleared = response.cookies[COOKIE]
    assert cleared.value == ""
    assert cleared["max-age"] == "0"
    assert cleared["path"] == "/admin"


def admin_services() -> AdminServices:
    return AdminServices(KeyDirectory([]), VirtualKeys([]))


async def console(
    aiohttp_client: AiohttpClient, admin_key: str, viewer_key: str, now: list[float]
) -> TestClient[Any, Any]:
    root = web.Application()
    sub = admin_app(
        admin_services(),
        SecretStr(admin_key),
        viewer_keys={"auditor": SecretStr(viewer_key)},
        sessions=lambda access: ConsoleSessions(access, 60, clock=lambda: now[0]),
    )
    assert sub is not None
    root.add_subapp("/admin", sub)
    return await aiohttp_client(root)


async def who(client: TestClient[Any, Any], cookie: str) -> tuple[int, str | None]:
    response = await client.get("/admin/session", headers={"Cookie": f"{COOKIE}={cookie}"})
    return response.status, (await response.json())["error"]["code"] if response.status != 200 else None


async def cookie_of(client: TestClient[Any, Any], key: str) -> str:
    response = await client.post("/admin/session", json={"key": key})
    assert response.status == 200
    return response.cookies[COOKIE].value


async def test_a_session_ends_at_its_expiry_and_when_its_key_changes(aiohttp_client: AiohttpClient) -> None:
    """Stateless yet revocable where it matters: a new admin key signs everyone out (on every
    replica, since each derives its signing key from it), a changed viewer key signs its viewer out."""
    now = [1_000_000.0]
    first = await console(aiohttp_client, ADMIN_KEY, VIEWER_KEY, now)
    admin_cookie, viewer_cookie = await cookie_of(first, ADMIN_KEY), await cookie_of(first, VIEWER_KEY)
    replica = await console(aiohttp_client, ADMIN_KEY, VIEWER_KEY, now)  # another process, same config
    assert await who(replica, admin_cookie) == (200, None)
    assert await who(replica, viewer_cookie) == (200, None)
    new_viewer = await console(aiohttp_client, ADMIN_KEY, VIEWER_KEY[::-1], now)
    assert await who(new_viewer, viewer_cookie) == (401, "session_expired")
    assert await who(new_viewer, admin_cookie) == (200, None)
    new_admin = await console(aiohttp_client, ADMIN_KEY[::-1], VIEWER_KEY, now)
    assert (await who(new_admin, admin_cookie))[0] == 401
    now[0] += 61
    assert await who(first, admin_cookie) == (401, "session_expired")


@pytest.fixture
def tls_context(tmp_path: Any) -> Any:
    import datetime
    import ssl

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .sign(key, hashes.SHA256())
    )
    (tmp_path / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "key.pem").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    return context


async def test_over_tls_the_cookie_is_secure(aiohttp_client: AiohttpClient, tls_context: Any) -> None:
    from aiohttp.test_utils import TestServer

    root = web.Application()
    sub = admin_app(admin_services(), SecretStr(ADMIN_KEY), sessions=ConsoleSessions.factory(60))
    assert sub is not None
    root.add_subapp("/admin", sub)
    server = TestServer(root)
    await server.start_server(ssl=tls_context)
    try:
        async with (
            ClientSession() as http,
            http.post(server.make_url("/admin/session"), json={"key": ADMIN_KEY}, ssl=False) as response,
        ):
            assert response.status == 200
            assert response.cookies[COOKIE]["secure"] is True
    finally:
        await server.close()


async def test_an_unknown_csrf_header_name_is_not_enough(
    make_gateway: GatewayFactory, redis_settings: dict[str, str], http: ClientSession
) -> None:
    """The token must come in its own header: the same value in another is a change refused."""
    gateway = await make_gateway(console_config(redis_settings), ENV)
    signed = await sign_in(http, gateway, ADMIN_KEY)
    headers = {"Cookie": f"{COOKIE}={signed.cookie}", "x-csrf-token": signed.csrf}
    async with http.post(gateway.make_url("/admin/keys"), headers=headers, json={"name": "x"}) as response:
        assert response.status == 403
        assert (await response.json())["error"]["code"] == "csrf_failed"
