"""Who may use the admin API, checked by one middleware: the admin key (every route), a read-only
viewer key (GET routes only), or a console session standing for either (`gateway.console` signs
them; it plugs in here as a `SessionGate`, so this layer knows no cookie format).

The admin key's path is the one it always was: the throttle, the header, one hash compared in
constant time, the handler. Viewer keys are compared only when that comparison fails, and sessions
are read only when no key header is sent.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Callable, Mapping
from typing import Literal, Protocol

from aiohttp import web
from aiohttp.typedefs import Handler

from gateway.api.credentials import hash_key
from gateway.api.errors import AuthenticationFailed, PermissionDenied
from gateway.keys.throttle import FailureThrottle, TooManyAuthFailures, client_address

ADMIN_KEY_HEADER = "x-gateway-admin-key"
Role = Literal["admin", "viewer"]
ADMIN: Role = "admin"
VIEWER: Role = "viewer"
READ_METHODS = frozenset({"GET", "HEAD"})  # what a viewer may do
log = logging.getLogger(__name__)


class SessionGate(Protocol):
    """Console sessions as the admin middleware sees them."""

    @property
    def own_handlers(self) -> frozenset[Handler]:
        """Routes that authenticate by themselves (signing in, out): the middleware lets them through."""
        ...

    def routes(self) -> list[web.RouteDef]: ...

    def role(self, request: web.Request) -> Role | None:
        """The role of the request's valid session; None: it has no session cookie. Raises 401 for a
        forged or ended session and 403 for a change without its CSRF token."""
        ...


class AdminAccess:
    """The admin key and the viewer keys, held as hashes, and the secrets derived from the admin key."""

    def __init__(
        self,
        admin_key: str,
        viewers: Mapping[str, str],
        throttle: FailureThrottle,
        count: Callable[[str], None],
    ) -> None:
        self.digest = hash_key(admin_key)
        self._viewers = {name: hash_key(value) for name, value in viewers.items()}
        # Every secret of the admin API's own (the console's signing keys) is derived from the admin
        # key, so a new admin key invalidates all of them at once. The key itself is not kept.
        self._root = hmac.new(admin_key.encode("utf-8", "surrogateescape"), b"gateway admin", hashlib.sha256).digest()
        self.throttle = throttle
        self.count = count  # a failure, by reason: missing, invalid, throttled
        self.sessions: SessionGate | None = None

    def derive(self, purpose: str) -> bytes:
        """A secret for one purpose, from the admin key."""
        return hmac.new(self._root, purpose.encode(), hashlib.sha256).digest()

    def viewer_of(self, digest: str) -> str | None:
        """The name of the viewer key with this hash. Every one is compared, in constant time."""
        found = None
        for name, viewer in self._viewers.items():
            if hmac.compare_digest(digest, viewer):
                found = name
        return found

    def role_of(self, presented: str) -> tuple[Role, str] | None:
        """(role, name) of a presented key; None: neither the admin key nor a viewer key."""
        digest = hash_key(presented)
        if hmac.compare_digest(digest, self.digest):
            return ADMIN, ADMIN
        viewer = self.viewer_of(digest)
        return (VIEWER, viewer) if viewer is not None else None

    def viewer_digest(self, name: str) -> str | None:
        return self._viewers.get(name)

    def check_throttle(self, address: str) -> None:
        """429 while this address is throttled: refused before anything it sent is looked at."""
        wait = self.throttle.retry_after(address)
        if wait is not None:
            self.count("throttled")
            raise TooManyAuthFailures.after(wait, "admin authentications")

    def refuse(self, address: str, what: str, message: str, code: str) -> AuthenticationFailed:
        """A failed authentication: counted, throttled, logged (never the value tried); the 401 to raise."""
        self.count("invalid")
        limit_reached = self.throttle.failed(address)
        log.warning(
            "admin API: %s from %s (the value tried is not logged)%s",
            what,
            address,
            f"; {self.throttle.limit} failures within {self.throttle.window_s:g}s: "
            "this address is refused until the window ends"
            if limit_reached
            else "",
        )
        return AuthenticationFailed(message, code=code)


ACCESS = web.AppKey("admin_access", AdminAccess)


def read_only(request: web.Request) -> None:
    """403 for a viewer's change."""
    if request.method not in READ_METHODS:
        raise PermissionDenied(
            "Viewer keys and viewer sessions are read-only: they may use GET routes only.", code="read_only_viewer"
        )


@web.middleware
async def admin_only(request: web.Request, handler: Handler) -> web.StreamResponse:
    access, address = request.app[ACCESS], client_address(request.remote)
    access.check_throttle(address)
    presented = request.headers.get(ADMIN_KEY_HEADER, "").strip()
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if not presented and scheme.lower() == "bearer":
        presented = token.strip()
    if presented:
        digest = hash_key(presented)
        # Hashes of equal length compared in constant time: nothing about the admin key leaks by timing.
        if hmac.compare_digest(digest, access.digest):
            return await handler(request)
        if access.viewer_of(digest) is None:
            raise access.refuse(address, "an invalid admin key", "Invalid admin key.", "invalid_admin_key")
        read_only(request)
        return await handler(request)
    sessions = access.sessions
    if sessions is not None:
        if request.match_info.handler in sessions.own_handlers:
            return await handler(request)
        role = sessions.role(request)
        if role is not None:
            if role == VIEWER:
                read_only(request)
            return await handler(request)
    access.count("missing")
    log.warning("admin API: a request without the admin key from %s", address)
    raise AuthenticationFailed(
        f"The admin API needs the admin key, as 'Authorization: Bearer <key>' or '{ADMIN_KEY_HEADER}'"
        + (", or a console session." if sessions is not None else "."),
        code="missing_admin_key",
    )
