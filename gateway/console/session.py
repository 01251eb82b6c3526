"""A console session, carried whole in its cookie and signed with HMAC-SHA256.

Why a signed cookie rather than a session table: any worker of any replica checks it with no
shared store and no round trip (the gateway may run without Redis), and nothing grows with the
number of sign-ins. Its signing key is derived from the admin key, so a new admin key signs
everyone out; a viewer's session also carries a fingerprint of its viewer key, so changing or
removing that key ends its sessions. The price of statelessness: signing out clears the browser's
cookie, and a copy of it (it is HttpOnly: scripts cannot read it) stays valid until it expires, so
the TTL bounds it (`admin.session_ttl_s`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from dataclasses import dataclass

import orjson

from gateway.keys.access import ADMIN, VIEWER, Role

_VERSION = 1
_ROLES: dict[str, Role] = {ADMIN: ADMIN, VIEWER: VIEWER}
MAX_TOKEN_CHARS = 1024  # a longer cookie is refused unread


@dataclass(frozen=True, slots=True)
class Session:
    role: Role
    name: str  # the viewer key's name, or "admin"
    expires_at: int  # Unix seconds
    nonce: str  # random: each sign-in's own CSRF token derives from it
    credential: str  # a fingerprint of the key signed in with (a viewer's), "" for the admin


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class SessionSigner:
    def __init__(self, secret: bytes) -> None:
        self._secret = secret

    def issue(self, role: Role, name: str, credential: str, expires_at: int) -> tuple[str, Session]:
        """(the cookie's value, the session it stands for)."""
        session = Session(role, name, expires_at, b64(secrets.token_bytes(16)), credential)
        payload = b64(orjson.dumps([_VERSION, role, name, expires_at, session.nonce, credential]))
        return f"{payload}.{self._mac(payload)}", session

    def read(self, token: str) -> Session | None:
        """The session a cookie's value stands for, expired or not; None: not one this gateway signed."""
        payload, dot, mac = token.partition(".")
        if (
            not dot
            or len(token) > MAX_TOKEN_CHARS
            or not hmac.compare_digest(mac.encode("utf-8", "surrogateescape"), self._mac(payload).encode())
        ):
            return None
        try:
            version, role, name, expires_at, nonce, credential = orjson.loads(_unb64(payload))
        except (ValueError, TypeError, binascii.Error):  # signed by us, so only an older format gets here
            return None
        if version != _VERSION or role not in _ROLES or not isinstance(expires_at, int):
            return None
        return Session(_ROLES[role], str(name), expires_at, str(nonce), str(credential))

    def _mac(self, payload: str) -> str:
        return b64(hmac.new(self._secret, payload.encode("utf-8", "surrogateescape"), hashlib.sha256).digest())
