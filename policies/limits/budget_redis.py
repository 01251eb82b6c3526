"""Budgets in Redis: one Lua script per operation, so replicas share one total per key and period.

Layout per key, period and period index: `{prefix}budget:{key}:{period}:{index}` (a calendar
period with its zone: `month@Europe/Paris`) a hash (tokens, cost: charged; rtokens, rcost: reserved;
`lease:{id}`: one reservation's amounts) and `…:leases` a sorted set of reservation ids scored by
their expiry (Redis's clock, `TIME`). Both expire one period (its longest, for a calendar one, plus
a lease TTL) after their last write. On a Redis Cluster the key's name is a
hash tag (`{prefix}budget:{team}:…`): both keys in one slot, so each script stays atomic.
"""

from __future__ import annotations

from typing import Literal

from policies.limits.budget import BudgetDecision, Charge, Spend, to_pico
from policies.limits.specs import BudgetSpec
from policies.redis_pool import RedisClient, slot_tag

_REFUSED: dict[int, Literal["tokens", "cost"] | None] = {0: None, 1: "tokens", 2: "cost"}

# Expired reservations give their amounts back; with none left, reserved totals are exactly zero.
_PURGE = """
if redis.replicate_commands then redis.replicate_commands() end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
-- whole numbers as digits: a Lua number argument would be written as 1e+15 past 14 digits
local function int(x) return string.format('%d', x) end
local function drop(id)
  local held = redis.call('HGET', KEYS[1], 'lease:' .. id)
  if held then
    local t, c = string.match(held, '^(%S+) (%S+)$')
    redis.call('HINCRBY', KEYS[1], 'rtokens', int(-tonumber(t)))
    redis.call('HINCRBY', KEYS[1], 'rcost', int(-tonumber(c)))
    redis.call('HDEL', KEYS[1], 'lease:' .. id)
  end
  redis.call('ZREM', KEYS[2], id)
end
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)) do drop(id) end
local function totals()
  local h = redis.call('HMGET', KEYS[1], 'tokens', 'cost', 'rtokens', 'rcost')
  return {tonumber(h[1]) or 0, tonumber(h[2]) or 0, tonumber(h[3]) or 0, tonumber(h[4]) or 0}
end
local function keep(ttl_ms)
  redis.call('PEXPIRE', KEYS[1], ttl_ms)
  redis.call('PEXPIRE', KEYS[2], ttl_ms)
end
"""

# ARGV: reservation id, tokens, cost, token limit (-1: none), cost limit (-1: none), lease ttl (s), key ttl (ms).
# The rule of `budget.refusal`: the estimate must fit in what remains, and something must remain.
RESERVE = (
    _PURGE
    + """
local id = ARGV[1]
local tokens, cost = tonumber(ARGV[2]), tonumber(ARGV[3])
local token_limit, cost_limit = tonumber(ARGV[4]), tonumber(ARGV[5])
local function fits(committed, wanted, limit)
  return limit < 0 or (committed < limit and committed + wanted <= limit)
end
local s = totals()
local refused = 0
if not fits(s[1] + s[3], tokens, token_limit) then refused = 1
elseif not fits(s[2] + s[4], cost, cost_limit) then refused = 2 end
if refused == 0 then
  redis.call('HINCRBY', KEYS[1], 'rtokens', ARGV[2])
  redis.call('HINCRBY', KEYS[1], 'rcost', ARGV[3])
  redis.call('HSET', KEYS[1], 'lease:' .. id, ARGV[2] .. ' ' .. ARGV[3])
  redis.call('ZADD', KEYS[2], now + tonumber(ARGV[6]), id)
  keep(ARGV[7])
end
return {refused, s[1], s[2], s[3], s[4]}
"""
)

# ARGV: reservation id (may be empty), tokens, cost, key ttl (ms).
SETTLE = (
    _PURGE
    + """
-- A total saturates at 2^62 (each charge is at most 2^61), so HINCRBY can never overflow.
local function add(field, amount)
  local total = tonumber(redis.call('HGET', KEYS[1], field)) or 0
  if total + tonumber(amount) >= 2 ^ 62 then redis.call('HSET', KEYS[1], field, int(2 ^ 62))
  else redis.call('HINCRBY', KEYS[1], field, amount) end
end
if ARGV[1] ~= '' then drop(ARGV[1]) end
add('tokens', ARGV[2])
add('cost', ARGV[3])
if redis.call('ZCARD', KEYS[2]) == 0 then redis.call('HSET', KEYS[1], 'rtokens', 0, 'rcost', 0) end
keep(ARGV[4])
return 1
"""
)

SPEND = _PURGE + "return totals()\n"


class RedisBudgetStore:
    def __init__(self, client: RedisClient, *, prefix: str, lease_ttl_s: float = 900.0) -> None:
        self._prefix = prefix
        self._client = client
        self._lease_ttl_s = lease_ttl_s
        self._reserve = client.register_script(RESERVE)
        self._settle = client.register_script(SETTLE)
        self._spend = client.register_script(SPEND)

    async def reserve(
        self, key: str, budget: BudgetSpec, window: int, charge: Charge, reservation: str
    ) -> BudgetDecision:
        token_limit = budget.tokens if budget.tokens is not None else -1
        cost_limit = to_pico(budget.cost_usd) if budget.cost_usd is not None else -1
        args: list[str | int | float] = [
            reservation,
            charge.tokens,
            charge.cost_pico,
            token_limit,
            cost_limit,
            self._lease_ttl_s,
            self._ttl_ms(budget),
        ]
        reply = await self._reserve(keys=self._keys(key, budget, window), args=args)
        refused, *figures = (int(value) for value in reply)
        if refused not in _REFUSED:
            raise ValueError(f"the budget script answered {refused!r}")  # never read as an admission
        return BudgetDecision(refused=_REFUSED[refused], window=window, spend=Spend(*figures))

    async def settle(self, key: str, budget: BudgetSpec, window: int, reservation: str, charge: Charge) -> None:
        args: list[str | int] = [reservation, charge.tokens, charge.cost_pico, self._ttl_ms(budget)]
        await self._settle(keys=self._keys(key, budget, window), args=args)

    async def spend(self, key: str, budget: BudgetSpec, window: int) -> Spend:
        reply = await self._spend(keys=self._keys(key, budget, window), args=[])
        return Spend(*(int(value) for value in reply))

    def _keys(self, key: str, budget: BudgetSpec, window: int) -> list[str]:
        base = f"{self._prefix}budget:{slot_tag(self._client, key)}:{budget.store_name}:{window}"
        return [base, base + ":leases"]

    def _ttl_ms(self, budget: BudgetSpec) -> int:
        """Renewed on every write: a period's figures outlive it by at most one period. Relative, so
        that it needs no agreement between this process's clock and Redis's."""
        return round((budget.seconds + self._lease_ttl_s) * 1000)
