"""CSRF tokens: one per session, derived from its nonce with a key of its own (so nothing is
stored), handed to the page when it signs in or asks who it is, and sent back by the page in a
header on every change. A cross-site page can neither read it (no CORS headers are ever sent) nor
set a custom header without a preflight the gateway does not grant; the SameSite=Strict cookie is
a second wall."""

from __future__ import annotations

import hashlib
import hmac

from gateway.console.session import Session, b64

CSRF_HEADER = "x-gateway-csrf"


class CsrfTokens:
    def __init__(self, secret: bytes) -> None:
        self._secret = secret

    def token(self, session: Session) -> str:
        return b64(hmac.new(self._secret, session.nonce.encode(), hashlib.sha256).digest())

    def matches(self, session: Session, presented: str) -> bool:
        return bool(presented) and hmac.compare_digest(
            presented.encode("utf-8", "surrogateescape"), self.token(session).encode()
        )
