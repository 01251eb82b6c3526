"""What an operator configures: rate limits, budgets, prices and the Redis failure mode.

These models are shared by the key records (`gateway.keys`) and the deployment config, so they
live here, beside the code that enforces them.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from typing import Annotated, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from policies.limits.calendar import CALENDAR_PERIODS, DEFAULT_ZONE, LONGEST_S, CalendarPeriod, calendar, time_zone

_PERIOD = re.compile(r"^(\d{1,12})([smhdw])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}

# Bounds of every configured figure, so that none can overflow the arithmetic in Redis's scripts
# (Lua numbers are doubles, exact to 2^53; Redis integers are 64-bit): far above any real use.
RATE_MAX = 10**12  # rpm and tpm
CONCURRENT_MAX = 10**6
BUDGET_TOKENS_MAX = 10**15
BUDGET_USD_MAX = 10**6  # 10^18 pico-dollars
PRICE_PER_1M_MAX = 10**6  # USD per million tokens
PERIOD_MAX_S = 10 * 366 * 86400  # ten years


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LimitSpec(_Strict):
    """Per minute and in flight; None: that dimension is not limited."""

    # Requests per minute; beyond: 429 with retry-after.
    rpm: Annotated[int, Field(ge=1, le=RATE_MAX)] | None = None
    # Tokens per minute (prompt estimate, then actual usage).
    tpm: Annotated[int, Field(ge=1, le=RATE_MAX)] | None = None
    # Requests in flight at once.
    concurrent: Annotated[int, Field(ge=1, le=CONCURRENT_MAX)] | None = None

    @property
    def empty(self) -> bool:
        return self.rpm is None and self.tpm is None and self.concurrent is None


@functools.lru_cache(maxsize=256)  # a handful of distinct periods, read on every request
def period_seconds(period: str) -> int:
    match = _PERIOD.match(period)
    if match is None:
        raise ValueError(f"a period is a number and a unit (s, m, h, d, w), e.g. 30d or 1h; got {period!r}")
    seconds = int(match.group(1)) * _UNIT_S[match.group(2)]
    if seconds < 1:
        raise ValueError("a period must be at least 1s")
    if seconds > PERIOD_MAX_S:
        raise ValueError(f"a period must be at most ten years ({PERIOD_MAX_S}s); got {period!r}")
    return seconds


class BudgetSpec(_Strict):
    """Spend allowed per period. A fixed period (`30d`, `1h`) is a window aligned on the Unix epoch
    (a `30d` period starts every 30 days since 1970-01-01 UTC); a calendar period (`day`, `week`,
    `month`) starts at local midnight in `timezone` (see `calendar`). Either way every replica
    agrees on them without coordination."""

    # Tokens (prompt and completion) allowed per period.
    tokens: Annotated[int, Field(ge=1, le=BUDGET_TOKENS_MAX)] | None = None
    # US dollars allowed per period, at the deployments' prices.
    cost_usd: Annotated[float, Field(gt=0, le=BUDGET_USD_MAX)] | None = None
    # A fixed window (30d, 1h: a number and s, m, h, d or w) or a calendar period (day, week, month).
    period: str = "30d"
    timezone: Annotated[str, Field(min_length=1, max_length=64)] = DEFAULT_ZONE  # of calendar periods

    @field_validator("period")
    @classmethod
    def _valid_period(cls, value: str) -> str:
        if value in CALENDAR_PERIODS:
            return value
        if _PERIOD.match(value) is None:
            raise ValueError(
                "a period is a number and a unit (s, m, h, d, w), e.g. 30d or 1h, or a calendar period "
                f"({', '.join(CALENDAR_PERIODS)}); got {value!r}"
            )
        period_seconds(value)  # its bounds
        return value

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        time_zone(value)  # raises ValueError naming the nearest zone
        return value

    @model_validator(mode="after")
    def _zone_of_a_calendar_period(self) -> BudgetSpec:
        if self.timezone != DEFAULT_ZONE and self.period not in CALENDAR_PERIODS:
            raise ValueError(
                f"'timezone' applies to calendar periods ({', '.join(CALENDAR_PERIODS)}); "
                f"{self.period!r} is a fixed window aligned on the Unix epoch"
            )
        return self

    @property
    def limited(self) -> bool:
        return self.tokens is not None or self.cost_usd is not None

    @property
    def seconds(self) -> int:
        """The longest a period lasts (a calendar month: 31 days and a DST hour, rounded up)."""
        calendar_length = LONGEST_S.get(self.period)
        return calendar_length if calendar_length is not None else period_seconds(self.period)

    @property
    def store_name(self) -> str:
        """The period as stores name its figures: a key whose period or zone changes starts afresh."""
        return self.period if self.period not in CALENDAR_PERIODS else f"{self.period}@{self.timezone}"

    @property
    def label(self) -> str:
        """The period in words for messages: `30d`, `month (Europe/Paris)`."""
        return self.period if self.period not in CALENDAR_PERIODS else f"{self.period} ({self.timezone})"

    def window(self, now: float) -> tuple[int, float, float]:
        """(index, start, end) of the period that holds `now` (Unix seconds); `start <= now < end`."""
        if self.period in CALENDAR_PERIODS:
            return calendar(cast(CalendarPeriod, self.period), self.timezone).window(now)
        seconds = period_seconds(self.period)
        index = math.floor(now / seconds)
        return index, index * seconds, (index + 1) * seconds


PricePer1M = Annotated[float, Field(ge=0, le=PRICE_PER_1M_MAX)]


class PriceTier(_Strict):
    """The prices of a request whose prompt has more than `above_prompt_tokens` tokens (a long-context
    tier): as providers bill them, every token of such a request is at these prices, not only those
    past the threshold. A price not given is the base price's."""

    # The tier applies to requests whose prompt has more tokens than this.
    above_prompt_tokens: Annotated[int, Field(ge=0, le=BUDGET_TOKENS_MAX)]
    # USD per million prompt tokens in this tier (unset: the base price).
    prompt_per_1m: PricePer1M | None = None
    # USD per million completion tokens in this tier (unset: the base price).
    completion_per_1m: PricePer1M | None = None
    # USD per million prompt tokens read from the cache in this tier (unset: the base price).
    cached_prompt_per_1m: PricePer1M | None = None
    # USD per million prompt tokens written to the cache in this tier (unset: the base price).
    cache_write_per_1m: PricePer1M | None = None


class Price(_Strict):
    """US dollars per one million tokens, as providers publish them."""

    # USD per million prompt tokens.
    prompt_per_1m: PricePer1M = 0.0
    # USD per million completion tokens.
    completion_per_1m: PricePer1M = 0.0
    # Prompt tokens the upstream reports as read from its prompt cache (usage.prompt_tokens_details.cached_tokens);
    # None: they cost what other prompt tokens cost.
    cached_prompt_per_1m: PricePer1M | None = None
    # Prompt tokens the upstream reports as written to its prompt cache (Anthropic's
    # cache_creation_input_tokens: usage.prompt_tokens_details.cache_write_tokens); None: they cost
    # what other prompt tokens cost.
    cache_write_per_1m: PricePer1M | None = None
    # Long-context prices, by increasing threshold: the last one the prompt exceeds applies.
    tiers: tuple[PriceTier, ...] = ()

    @field_validator("tiers")
    @classmethod
    def _increasing(cls, tiers: tuple[PriceTier, ...]) -> tuple[PriceTier, ...]:
        thresholds = [tier.above_prompt_tokens for tier in tiers]
        if any(later <= earlier for earlier, later in itertools.pairwise(thresholds)):
            raise ValueError(f"tiers must be in increasing order of above_prompt_tokens; got {thresholds}")
        return tiers

    @property
    def caches(self) -> bool:
        """Are prompt-cache reads or writes priced apart (so the answer's cache figures matter)?"""
        prices: tuple[Price | PriceTier, ...] = (self, *self.tiers)
        return any(price.cached_prompt_per_1m is not None or price.cache_write_per_1m is not None for price in prices)

    def cost_per_1m(
        self, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0, cache_write_tokens: int = 0
    ) -> float:
        """What the tokens cost, in USD x 10^6 (the one formula behind budgets, cost headers and the
        spend view). Prompt tokens read from or written to the upstream's prompt cache are billed at
        their own prices and not again as prompt tokens; without such a price they are prompt
        tokens like the others. A prompt past a tier's threshold pays that tier's prices throughout."""
        prompt, completion = self.prompt_per_1m, self.completion_per_1m
        read, write = self.cached_prompt_per_1m, self.cache_write_per_1m
        if self.tiers and prompt_tokens > self.tiers[0].above_prompt_tokens:
            tier = next(t for t in reversed(self.tiers) if prompt_tokens > t.above_prompt_tokens)
            prompt = tier.prompt_per_1m if tier.prompt_per_1m is not None else prompt
            completion = tier.completion_per_1m if tier.completion_per_1m is not None else completion
            read = tier.cached_prompt_per_1m if tier.cached_prompt_per_1m is not None else read
            write = tier.cache_write_per_1m if tier.cache_write_per_1m is not None else write
        cached = min(cached_tokens, prompt_tokens) if read is not None else 0
        written = min(cache_write_tokens, prompt_tokens - cached) if write is not None else 0
        return (
            (prompt_tokens - cached - written) * prompt
            + cached * (read or 0.0)
            + written * (write or 0.0)
            + completion_tokens * completion
        )


FREE = Price()
NO_LIMITS = LimitSpec()


class LimitsSettings(_Strict):
    """The `limits:` section. `on_redis_error`: `open` serves requests unlimited while Redis is
    unreachable (refused connections, timeouts), `closed` refuses them with 503; any other failure
    (a script error, no free pooled connection) is always a 503. Each failure is counted and logged
    once per interval."""

    # open: serve without the limit while Redis fails; closed: refuse with 503 limits_unavailable.
    on_redis_error: Literal["open", "closed"] = "open"
    lease_ttl_s: Annotated[float, Field(gt=0, le=86400)] = 900.0  # a crashed worker's slots and reservations expire
    # Redis failures of the limits are logged at most this often.
    log_interval_s: Annotated[float, Field(gt=0)] = 60.0
