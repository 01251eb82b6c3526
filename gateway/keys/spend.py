"""Spend per key, per deployment and per listed metadata value, in daily buckets: what
`GET /admin/spend?group_by=key&period=30d` reads.

Each answered request adds whole nano-dollars (its cost and what a cache hit saved), tokens and a
request to the fields of its day's bucket. Requests only add to a per-process tally; a flush (every
`FLUSH_INTERVAL_S`, before each admin read on this worker, and at shutdown) sends the tally to Redis
as one Lua script per day: integer `HINCRBY`s on one hash, `<prefix>spend:{YYYYMMDD}` (one key, so
one slot in a cluster), expiring after `retention_days`. Integer sums are exact in any order, so
every worker and replica adds to the same totals without losing or double-counting a nano-dollar.
Without Redis the buckets live in this process.

A tally Redis refuses is kept and tried again at the next flush (logged once per interval).

Callers choose metadata values, so each listed metadata key keeps at most `max_values` distinct
values per worker and day (`observability.spend.max_values`); a request with a value beyond them
is added to the `other` group: a day's hash holds at most that many values per worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import re
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from gateway.api.errors import InvalidRequest

log = logging.getLogger(__name__)

STOP_FLUSH_S = 2.0  # the last flush at shutdown
FLUSH_INTERVAL_S = 1.0
DAY_S = 86400
SEP = "\x1f"  # between a field's parts: no key, deployment or metadata value may hold a control character
FIGURES = ("cost", "saved", "requests", "prompt_tokens", "completion_tokens")
OTHER = "other"  # the group of the metadata values beyond `max_values`
_PERIOD = re.compile(r"^(\d{1,4})d$")
_LOG_INTERVAL_S = 60.0

# One bucket's increments: HINCRBY each (field, amount) pair of ARGV[2..], then keep the hash ARGV[1] seconds.
_ADD = """
for i = 2, #ARGV, 2 do
  redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1])
end
redis.call('EXPIRE', KEYS[1], ARGV[1])
return 1
"""


@dataclass(frozen=True, slots=True)
class Spent:
    """One request's share of the spend."""

    key: str
    deployment: str
    cost_nano: int
    saved_nano: int
    prompt_tokens: int
    completion_tokens: int
    metadata: Mapping[str, str] | None = None


Tally = dict[str, int]  # field -> amount


class SpendBook:
    def __init__(
        self,
        redis: aioredis.Redis | None,
        prefix: str,
        metadata_keys: Iterable[str] = (),
        retention_days: int = 400,
        clock: Any = time.time,
        max_values: int = 1000,
    ) -> None:
        self._redis = redis
        self._prefix = f"{prefix}spend:"
        self.metadata_keys = tuple(metadata_keys)
        self.retention_days = retention_days
        self._clock = clock
        self._pending: dict[str, Tally] = defaultdict(lambda: defaultdict(int))  # day -> tally
        self._kept: dict[str, Tally] = defaultdict(lambda: defaultdict(int))  # without Redis: every bucket
        self._script = redis.register_script(_ADD) if redis is not None else None
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self._failures = 0
        self._logged_at = 0.0
        self.max_values = max_values
        self._values_day = ""
        self._values: dict[str, set[str]] = {}  # listed metadata key -> its values in today's spend

    def add(self, spent: Spent) -> None:
        """All a request pays: a few dict increments (only of the figures it changes)."""
        day = _day(self._clock())
        tally = self._pending[day]
        groups = [("key", spent.key), ("deployment", spent.deployment)]
        if spent.metadata and self.metadata_keys:
            groups += [
                (f"metadata.{name}", self._bounded(day, name, spent.metadata[name]))
                for name in self.metadata_keys
                if name in spent.metadata
            ]
        figures = (spent.cost_nano, spent.saved_nano, 1, spent.prompt_tokens, spent.completion_tokens)
        changed = [(position, amount) for position, amount in enumerate(figures) if amount]
        for group, name in groups:
            fields = _fields(group, name)
            for position, amount in changed:
                tally[fields[position]] += amount

    def _bounded(self, day: str, name: str, value: str) -> str:
        """`value` if it is one of the first `max_values` of `name` today, else `other`."""
        if day != self._values_day:
            self._values_day, self._values = day, {}
        seen = self._values.get(name)
        if seen is None:
            seen = self._values[name] = set()
        if value in seen:
            return value
        if len(seen) >= self.max_values:
            return OTHER
        seen.add(value)
        return value

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._flush_every())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        # A last flush, bounded: a Redis already gone must not hold the shutdown past its grace.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.flush(), STOP_FLUSH_S)

    async def _flush_every(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_INTERVAL_S)
            await self.flush()

    async def flush(self) -> None:
        """Send this process's tally (to Redis, or to its own buckets)."""
        async with self._lock:
            pending, self._pending = self._pending, defaultdict(lambda: defaultdict(int))
            for day, tally in pending.items():
                if self._script is None:
                    for name, amount in tally.items():
                        self._kept[day][name] += amount
                    continue
                args: list[Any] = [self.retention_days * DAY_S]
                for name, amount in tally.items():
                    args += [name, amount]
                try:
                    await self._script(keys=[self._prefix + day], args=args)
                except (RedisError, OSError, TimeoutError) as exc:
                    self._failed(exc)
                    for name, amount in tally.items():  # tried again at the next flush
                        self._pending[day][name] += amount

    async def report(self, group_by: str, period: str) -> dict[str, Any]:
        """The admin API's spend view: per `group_by` value, over the last `period` (e.g. 30d) of days."""
        group = self._group(group_by)
        days = self._days(period)
        await self.flush()
        totals: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(FIGURES, 0))
        for bucket in await self._buckets(days):
            for field_name, amount in bucket.items():
                kind, _, rest = field_name.partition(SEP)
                name, _, figure = rest.rpartition(SEP)
                if kind == group and figure in FIGURES:
                    totals[name][figure] += amount
        rows = sorted(totals.items(), key=lambda item: (-item[1]["cost"], item[0]))
        return {
            "group_by": group,
            "period": period,
            "from": _iso_day(days[-1]),
            "to": _iso_day(days[0]),
            "total": _shown({figure: sum(row[figure] for _, row in rows) for figure in FIGURES}),
            "groups": [{"name": name, **_shown(row)} for name, row in rows],
        }

    async def _buckets(self, days: list[str]) -> list[Mapping[str, int]]:
        if self._redis is None:
            return [self._kept.get(day, {}) for day in days]
        async with self._redis.pipeline(transaction=False) as pipe:
            for day in days:
                pipe.hgetall(self._prefix + day)
            replies = await pipe.execute()
        return [{_text(name): int(amount) for name, amount in reply.items()} for reply in replies]

    def _group(self, group_by: str) -> str:
        if group_by in ("key", "deployment"):
            return group_by
        name = group_by.removeprefix("metadata.")
        if name in self.metadata_keys:
            return f"metadata.{name}"
        listed = ", ".join(["key", "deployment", *(f"metadata.{n}" for n in self.metadata_keys)])
        raise InvalidRequest(
            f"group_by must be one of {listed} (observability.spend.metadata_keys lists metadata).", param="group_by"
        )

    def _days(self, period: str) -> list[str]:
        """The days of the period, today first."""
        match = _PERIOD.match(period)
        count = int(match.group(1)) if match else 0
        if not 1 <= count <= self.retention_days:
            raise InvalidRequest(
                f"period must be a number of days from 1d to {self.retention_days}d "
                "(observability.spend.retention_days).",
                param="period",
            )
        today = int(self._clock() // DAY_S)
        return [_day((today - offset) * DAY_S) for offset in range(count)]

    def _failed(self, exc: BaseException) -> None:
        self._failures += 1
        now = time.monotonic()
        if now - self._logged_at >= _LOG_INTERVAL_S:
            self._logged_at = now
            log.warning(
                "spend counters: %d Redis write(s) failed (last: %s); the tally is kept and retried",
                self._failures,
                type(exc).__name__,
            )
            self._failures = 0


def _day(now: float) -> str:
    return _day_name(int(now // DAY_S))


@functools.lru_cache(maxsize=8)
def _day_name(index: int) -> str:
    return time.strftime("%Y%m%d", time.gmtime(index * DAY_S))


@functools.lru_cache(maxsize=4096)  # keys, deployments and listed metadata values: built once each
def _fields(group: str, name: str) -> tuple[str, ...]:
    """The bucket's field of each figure for one group value (`key<SEP>team-a<SEP>cost` …)."""
    return tuple(f"{group}{SEP}{name}{SEP}{figure}" for figure in FIGURES)


def _iso_day(day: str) -> str:
    return f"{day[:4]}-{day[4:6]}-{day[6:]}"


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _shown(row: Mapping[str, int]) -> dict[str, Any]:
    """Nano-dollars as USD (and as the exact integers), tokens and requests as they are."""
    return {
        "cost_usd": row["cost"] / 1e9,
        "cost_nano_usd": row["cost"],
        "saved_usd": row["saved"] / 1e9,
        "requests": row["requests"],
        "prompt_tokens": row["prompt_tokens"],
        "completion_tokens": row["completion_tokens"],
    }
