"""Failed authentications, throttled per client address.

A presented key is hashed (`gateway.api.credentials`) and looked up by its hash
(`gateway.keys.directory`). With no keys configured the gateway is open (a start-up warning says so).
Failed authentications are counted per client address (the transport peer's) and throttled: after
`API_FAILURES_PER_WINDOW` in a minute that address gets 429 `too_many_auth_failures` (with
`Retry-After`) for the rest of the minute.
"""

from __future__ import annotations

import ipaddress
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from contextvars import ContextVar

from gateway.api.errors import GatewayError

# --- failed authentications, throttled per client address -------------------------------------

# The reasons `gateway_auth_failures_total` counts (a fixed set: never a key or an address).
AUTH_FAILURE_REASONS = ("missing", "unknown", "expired", "revoked", "throttled")
# Those of `gateway_admin_auth_failures_total`.
ADMIN_AUTH_FAILURE_REASONS = ("missing", "invalid", "throttled")
_REASON_OF_CODE = {
    "missing_api_key": "missing",
    "invalid_api_key": "unknown",
    "expired_api_key": "expired",
    "revoked_api_key": "revoked",
}
API_FAILURES_PER_WINDOW = 20  # failed API-key authentications per client address per window
ADMIN_FAILURES_PER_WINDOW = 5  # failed admin-key authentications per client address per window
FAILURE_WINDOW_S = 60.0
MAX_TRACKED_ADDRESSES = 10_000  # per throttle; the oldest windows are dropped first


def failure_reason(code: str | None) -> str:
    """The metric's reason for a 401's `code`."""
    return _REASON_OF_CODE.get(code or "", "unknown")


def client_address(peer: str | None) -> str:
    """Whom a failure is counted against: the transport peer's address (never a forwarded header).
    An IPv6 client is counted by its /64 (one host usually holds the whole of it), an IPv4-mapped
    one as IPv4; a peer without an address (a Unix socket) is `local`."""
    if not peer:
        return "local"
    try:
        address = ipaddress.ip_address(peer.partition("%")[0])
    except ValueError:
        return peer[:64]
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        if address.is_loopback:
            return str(address)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


class TooManyAuthFailures(GatewayError):
    status = 429
    type = "rate_limit_error"
    code = "too_many_auth_failures"

    @classmethod
    def after(cls, retry_after_s: int, what: str = "authentications") -> TooManyAuthFailures:
        return cls(
            f"Too many failed {what} from this client address: try again in {retry_after_s}s.",
            headers={"Retry-After": str(retry_after_s)},
        )


class FailureThrottle:
    """At most `limit` failures per client address per fixed window of `window_s`; then every
    attempt from that address is refused (before its key is even looked at: a throttled guesser
    learns nothing) until the window ends. In process, bounded to `max_addresses` addresses."""

    def __init__(
        self,
        limit: int,
        window_s: float = FAILURE_WINDOW_S,
        *,
        max_addresses: int = MAX_TRACKED_ADDRESSES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit = limit
        self.window_s = window_s
        self._max = max_addresses
        self._clock = clock
        self._windows: OrderedDict[str, list[float]] = OrderedDict()  # address: [window start, failures]

    @property
    def tracking(self) -> bool:
        """Whether any address has failed lately (if not, none can be throttled)."""
        return bool(self._windows)

    def retry_after(self, address: str) -> int | None:
        """Seconds until `address` may try again; None: it may now."""
        window = self._windows.get(address)
        if window is None or window[1] < self.limit:
            return None
        left = window[0] + self.window_s - self._clock()
        if left <= 0:
            del self._windows[address]
            return None
        return max(1, math.ceil(left))

    def failed(self, address: str) -> bool:
        """Count a failure; True when it is the one that reached the limit."""
        now = self._clock()
        window = self._windows.get(address)
        if window is None or now >= window[0] + self.window_s:
            self._windows.pop(address, None)
            window = self._windows[address] = [now, 0]
            while len(self._windows) > self._max:
                self._windows.popitem(last=False)
        window[1] += 1
        return window[1] == self.limit


class AuthClient:
    """The client of the request being served, as authentication sees it (set per request by
    `gateway.http.middleware.envelope_middleware`): its transport peer, the throttle and the
    failure counter. Its address is worked out only when a failure or a throttled window needs it:
    a request that authenticates while nothing is throttled never parses it."""

    __slots__ = ("_address", "count", "peer", "throttle")

    def __init__(self, peer: str | None, throttle: FailureThrottle, count: Callable[[str], None]) -> None:
        self.peer = peer
        self.throttle = throttle
        self.count = count  # one failure, by reason (the metric)
        self._address: str | None = None

    @property
    def address(self) -> str:
        if self._address is None:
            self._address = client_address(self.peer)
        return self._address

    def check(self) -> None:
        """429 while this address is throttled."""
        if not self.throttle._windows:  # `tracking`, without a property call: on every request
            return
        wait = self.throttle.retry_after(self.address)
        if wait is not None:
            self.count("throttled")
            raise TooManyAuthFailures.after(wait)

    def failed(self, code: str | None) -> None:
        reason = failure_reason(code)
        self.count(reason)
        if reason != "missing":  # a client without a key guesses nothing
            self.throttle.failed(self.address)


AUTH_CLIENT: ContextVar[AuthClient | None] = ContextVar("auth_client", default=None)
