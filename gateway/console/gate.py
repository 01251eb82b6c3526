"""Signing in and out of the console, and the session check the admin middleware asks for.

`POST /admin/session {"key": …}` with the admin key or a viewer key sets the session cookie:
HttpOnly (no script reads it), SameSite=Strict (no other site's page sends it), Path=/admin (only
the admin API receives it), Max-Age the session's TTL, Secure when the request came over TLS.
The answer (and `GET /admin/session`) carries the session's CSRF token, which every change must
send back in `x-gateway-csrf`; `DELETE /admin/session` signs out. A wrong key counts against the
admin API's own failure throttle, so signing in is no way around it.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime

import orjson
from aiohttp import web
from aiohttp.typedefs import Handler

from gateway.api.errors import AuthenticationFailed, InvalidRequest, PermissionDenied
from gateway.api.parsing import parse_json_object
from gateway.console.csrf import CSRF_HEADER, CsrfTokens
from gateway.console.session import Session, SessionSigner, b64
from gateway.keys.access import ADMIN, READ_METHODS, AdminAccess, Role, SessionGate
from gateway.keys.throttle import client_address

COOKIE = "gateway_console"
COOKIE_PATH = "/admin"
log = logging.getLogger(__name__)


class ConsoleSessions:
    def __init__(self, access: AdminAccess, ttl_s: int, *, clock: Callable[[], float] = time.time) -> None:
        self._access = access
        self._ttl_s = ttl_s
        self._clock = clock
        self._signer = SessionSigner(access.derive("console session"))
        self._csrf = CsrfTokens(access.derive("console csrf"))
        self._fingerprints = access.derive("console viewer fingerprint")
        self._own = frozenset({self.sign_in, self.show, self.sign_out})

    @classmethod
    def factory(cls, ttl_s: int) -> Callable[[AdminAccess], SessionGate]:
        return lambda access: cls(access, ttl_s)

    @property
    def own_handlers(self) -> frozenset[Handler]:
        return self._own

    def routes(self) -> list[web.RouteDef]:
        return [
            web.post("/session", self.sign_in),
            web.get("/session", self.show),
            web.delete("/session", self.sign_out),
        ]

    def role(self, request: web.Request) -> Role | None:
        session = self._session(request)
        if session is None:
            return None
        if request.method not in READ_METHODS:
            self._check_csrf(request, session)
        return session.role

    async def sign_in(self, request: web.Request) -> web.Response:
        # JSON only: a cross-site form cannot send it without a CORS preflight (no "login CSRF").
        if request.content_type != "application/json":
            raise InvalidRequest(
                'Sign in with a JSON body, {"key": "…"}, sent as Content-Type: application/json.',
                status=415,
                code="unsupported_media_type",
            )
        key = parse_json_object(await request.read()).get("key")
        if not isinstance(key, str) or not key.strip():
            raise InvalidRequest("key: the admin key or a viewer key, as a string.", param="key")
        found = self._access.role_of(key.strip())
        address = client_address(request.remote)
        if found is None:
            raise self._access.refuse(
                address, "a console sign-in with an invalid key", "Invalid key.", "invalid_admin_key"
            )
        role, name = found
        value, session = self._signer.issue(role, name, self._credential(role, name), int(self._clock()) + self._ttl_s)
        log.info("console: %s (%s) signed in from %s", name, role, address)
        response = self._answer(session)
        response.set_cookie(
            COOKIE,
            value,
            max_age=self._ttl_s,
            path=COOKIE_PATH,
            httponly=True,
            samesite="Strict",
            secure=request.secure,
        )
        return response

    async def show(self, request: web.Request) -> web.Response:
        """Who is signed in, and the CSRF token the page needs (after a reload)."""
        session = self._session(request)
        if session is None:
            raise AuthenticationFailed("Not signed in to the console.", code="no_session")
        return self._answer(session)

    async def sign_out(self, request: web.Request) -> web.Response:
        session = self._session(request)
        if session is None:
            raise AuthenticationFailed("Not signed in to the console.", code="no_session")
        self._check_csrf(request, session)
        response = web.Response(body=b'{"signed_in": false}', content_type="application/json")
        response.del_cookie(COOKIE, path=COOKIE_PATH, httponly=True, samesite="Strict", secure=request.secure)
        return response

    def _session(self, request: web.Request) -> Session | None:
        value = request.cookies.get(COOKIE)
        if not value:
            return None
        session = self._signer.read(value)
        if session is None:
            address = client_address(request.remote)
            raise self._access.refuse(
                address, "a forged console session cookie", "Invalid console session.", "invalid_session"
            )
        if session.expires_at <= self._clock():
            raise AuthenticationFailed("The console session has expired: sign in again.", code="session_expired")
        if session.credential != self._credential(session.role, session.name):
            raise AuthenticationFailed(
                "The key this console session signed in with has changed or is gone: sign in again.",
                code="session_expired",
            )
        return session

    def _check_csrf(self, request: web.Request, session: Session) -> None:
        if not self._csrf.matches(session, request.headers.get(CSRF_HEADER, "")):
            log.warning("admin API: a change without its CSRF token from %s", client_address(request.remote))
            raise PermissionDenied(
                f"A change made with a console session needs its CSRF token in '{CSRF_HEADER}'.", code="csrf_failed"
            )

    def _credential(self, role: Role, name: str) -> str:
        """A fingerprint of the key a session stands for: "" for the admin key (a new one changes
        every signing key anyway), "-" for a viewer key that is gone (no session carries it)."""
        if role == ADMIN:
            return ""
        digest = self._access.viewer_digest(name)
        if digest is None:
            return "-"
        return b64(hmac.new(self._fingerprints, digest.encode(), hashlib.sha256).digest())[:22]

    def _answer(self, session: Session) -> web.Response:
        body = {
            "role": session.role,
            "name": session.name,
            "expires_at": datetime.fromtimestamp(session.expires_at, UTC).isoformat(),
            "csrf_token": self._csrf.token(session),
        }
        return web.Response(body=orjson.dumps(body), content_type="application/json")
