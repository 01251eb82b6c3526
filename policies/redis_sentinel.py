"""Sentinel discovery that says so when the Sentinels refuse the gateway's credentials.

redis-py's `Sentinel.discover_master` folds every Sentinel's failure into one `MasterNotFoundError`
that keeps only their text, so a wrong `redis.sentinel_password` (or none, for Sentinels with
`requirepass`) would read as "no master found". `CheckedSentinel` then asks the Sentinels once more
and, if one refuses the credentials, raises `SentinelAuthenticationError`, which names the settings
to fix and never their values. It stays a connection error: Redis counts as unreachable and
`limits.on_redis_error` decides, as for the master's own refused password.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from redis.asyncio.sentinel import MasterNotFoundError, Sentinel
from redis.exceptions import AuthenticationError, RedisError


class SentinelAuthenticationError(MasterNotFoundError, AuthenticationError):
    """No master was found because the Sentinels refused the credentials (wrong ones, or none)."""


class CheckedSentinel(Sentinel):
    """redis-py's Sentinel manager, whose failed discovery names refused credentials."""

    def __init__(self, sentinels: Sequence[tuple[str, int]], *, sentinel_kwargs: dict[str, Any]) -> None:
        super().__init__(list(sentinels), sentinel_kwargs=sentinel_kwargs)  # type: ignore[no-untyped-call]
        self._addresses = ", ".join(f"{host}:{port}" for host, port in sentinels)
        self._authenticates = bool(sentinel_kwargs.get("password"))

    async def discover_master(self, service_name: str) -> tuple[str, int]:
        try:
            address: tuple[str, int] = await super().discover_master(service_name)
        except MasterNotFoundError as exc:
            if not await self._refuse_credentials():
                raise
            raise SentinelAuthenticationError(self._refusal(service_name)) from exc
        return address

    async def _refuse_credentials(self) -> bool:
        """Does the first Sentinel that answers refuse these credentials? Only on a failed discovery:
        redis-py kept the text of each Sentinel's failure, not the failure."""
        for sentinel in self.sentinels:
            try:
                await sentinel.ping()
            except AuthenticationError:  # a wrong password (WRONGPASS), or none given (NOAUTH)
                return True
            except (RedisError, OSError):
                continue  # down or slow: ask the next
            return False
        return False

    def _refusal(self, service_name: str) -> str:
        where = f"the Sentinels at {self._addresses} (asked for the master {service_name!r})"
        if self._authenticates:
            return (
                f"{where} refused the gateway's credentials: check redis.sentinel_password "
                "(and redis.sentinel_username) against the Sentinels' requirepass or ACL user"
            )
        return f"{where} require a password: set redis.sentinel_password (the Sentinels' requirepass)"
