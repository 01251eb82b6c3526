"""Calendar budget periods (`day`, `week`, `month`) in a time zone, as finance teams count them: a
period starts at local midnight (a week on Monday, a month on its first day) and ends at the next
one, whatever length DST and the month give it.

A period is known by an index that grows with time (the local date's ordinal, the Monday's, or
year x 12 + month), so stores keep their figures under it as under a fixed window's. The zone is an
IANA name read from the system's time zone database (or the `tzdata` package); `UTC` needs neither.
"""

from __future__ import annotations

import difflib
import functools
import zoneinfo
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import Literal, get_args

CalendarPeriod = Literal["day", "week", "month"]
CALENDAR_PERIODS: tuple[str, ...] = get_args(CalendarPeriod)
DEFAULT_ZONE = "UTC"
# The longest each can last (a DST change adds an hour, a zone may move by a day): how long a store
# keeps a period's figures after its last write.
LONGEST_S = {"day": 2 * 86400, "week": 8 * 86400, "month": 32 * 86400}

Window = tuple[int, float, float]  # (index, start, end), Unix seconds


@functools.lru_cache(maxsize=64)
def time_zone(name: str) -> tzinfo:
    """The zone named (ValueError naming the nearest known one when there is none)."""
    if name == DEFAULT_ZONE:
        return UTC
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        pass
    known = zoneinfo.available_timezones()
    nearest = difflib.get_close_matches(name, sorted(known), n=1)
    hint = f"; did you mean {nearest[0]!r}?" if nearest else ""
    no_database = "" if known else " (this system has no time zone database: install the tzdata package)"
    raise ValueError(f"unknown time zone {name!r}{hint} (an IANA name such as Europe/Paris or UTC){no_database}")


class Calendar:
    """The windows of one period in one zone. The current one is kept: each request reads it with
    two comparisons, and the zone's rules run once per period."""

    def __init__(self, period: CalendarPeriod, zone: str) -> None:
        self.period = period
        self._zone = time_zone(zone)
        self._current: Window = (0, 0.0, 0.0)

    def window(self, now: float) -> Window:
        current = self._current
        if current[1] <= now < current[2]:
            return current
        self._current = current = self._compute(now)
        return current

    def _compute(self, now: float) -> Window:
        today = datetime.fromtimestamp(now, self._zone).date()
        if self.period == "day":
            first, following, index = today, today + timedelta(days=1), today.toordinal()
        elif self.period == "week":
            first = today - timedelta(days=today.weekday())  # ISO weeks start on Monday
            following, index = first + timedelta(days=7), (first.toordinal() - 1) // 7
        else:
            first = today.replace(day=1)
            following = date(first.year + first.month // 12, first.month % 12 + 1, 1)
            index = first.year * 12 + first.month - 1
        return index, self._midnight(first), self._midnight(following)

    def _midnight(self, day: date) -> float:
        # A midnight that a DST change skips (fold 0: the offset before it) is the change itself,
        # the day's first instant; a repeated one is taken the first time.
        return datetime(day.year, day.month, day.day, tzinfo=self._zone).timestamp()


@functools.lru_cache(maxsize=256)  # one per (period, zone) configured: shared by every key using it
def calendar(period: CalendarPeriod, zone: str) -> Calendar:
    return Calendar(period, zone)
