"""What `/ready` checks: the dependencies the gateway needs to serve, reachable right now."""

from __future__ import annotations

import asyncio

import redis.asyncio as aioredis
from redis.exceptions import RedisError

_CHECK_TIMEOUT_S = 1.0


class Readiness:
    def __init__(self, redis_url: str) -> None:
        self._redis: aioredis.Redis | None = None
        if redis_url:
            self._redis = aioredis.from_url(
                redis_url, socket_timeout=_CHECK_TIMEOUT_S, socket_connect_timeout=_CHECK_TIMEOUT_S
            )

    async def redis_status(self) -> str:
        if self._redis is None:
            return "not configured"
        try:
            await asyncio.wait_for(self._redis.ping(), _CHECK_TIMEOUT_S)
        except (TimeoutError, RedisError, OSError):
            return "unreachable"
        return "ok"

    async def aclose(self) -> None:
        if self._redis is not None:
            await self._redis.aclose()
