"""The rate limiter in Redis: one Lua script per operation, so every worker and replica that shares
the Redis enforces one limit. Time is Redis's own (`TIME`), so replicas' clocks need not agree.

Layout per scope: `{prefix}rate:{kind}:{name}` a hash (r, t: bucket levels; at: when) that expires
once both buckets would be full again (a missing hash is a full bucket), and `…:leases` a sorted
set of concurrency slots scored by their expiry. The scripts touch only keys passed in KEYS.

On a Redis Cluster the scope is a hash tag (`{prefix}rate:{key:team}`, `…:leases`), so each
scope's keys share a slot, and scopes do not: a request with several scopes (its key's and its
deployment's) takes from each in turn, one script per scope, and a refusal gives back what the
scopes before it took (`UNDO`). No bucket ever admits more than its limit; while a request that
one scope refuses holds another scope's slot for those few milliseconds, a request competing for
that other scope may be refused where the single-Redis script (all scopes at once) would admit it.
"""

from __future__ import annotations

from collections.abc import Sequence

from policies.limits.decision import Bucket, Dimension, RateDecision, Refusal
from policies.limits.rate import DIMENSIONS, Scope, ScopeOutcome, combine, refusal_for, too_large
from policies.redis_pool import RedisClient, is_cluster, slot_tag

_TOO_LARGE = 4  # the script's "dimension" for a request larger than a whole token bucket

_COMMON = """
if redis.replicate_commands then redis.replicate_commands() end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local function refill(level, last, cap)
  if cap <= 0 then return 0 end
  if not last then return cap end
  return math.min(cap, (tonumber(level) or 0) + math.max(0, now - last) * cap / 60)
end
local function wait(level, wanted, cap) return math.max(0, (wanted - level) * 60 / cap) end
-- Whole numbers for Redis as digits (a Lua number argument past 14 digits is written 1e+15, which
-- Redis refuses), and every number a reply or an expiry carries kept within what both hold exactly.
local LIMIT = 2 ^ 53
local function bound(x) return math.max(-LIMIT, math.min(LIMIT, x)) end
local function int(x) return string.format('%d', bound(x)) end
local function save(key, r, t, rpm, tpm)
  local full = 0
  if rpm > 0 then full = math.max(full, wait(r, rpm, rpm)) end
  if tpm > 0 then full = math.max(full, wait(t, tpm, tpm)) end
  redis.call('HSET', key, 'r', tostring(r), 't', tostring(t), 'at', tostring(now))
  redis.call('PEXPIRE', key, int(math.min(math.ceil(full * 1000) + 1000, 2 ^ 40)))  -- at most ~35 years
end
"""

# KEYS: bucket, leases per scope. ARGV: tokens, lease id, lease ttl (ms), then rpm, tpm, concurrent per scope.
ACQUIRE = (
    _COMMON
    + """
local tokens, lease, ttl = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]) / 1000
local n, state = #KEYS / 2, {}
local worst, worst_scope, worst_dim = -1, 0, 0
local too_large = 0  -- the first scope whose whole token bucket is smaller than the request
local function refuse(i, dim, w) if w > worst then worst, worst_scope, worst_dim = w, i, dim end end
for i = 1, n do
  local rpm, tpm, conc = tonumber(ARGV[1 + 3 * i]), tonumber(ARGV[2 + 3 * i]), tonumber(ARGV[3 + 3 * i])
  local h = redis.call('HMGET', KEYS[2 * i - 1], 'r', 't', 'at')
  local last = tonumber(h[3])
  local r, t = refill(h[1], last, rpm), refill(h[2], last, tpm)
  local active = 0
  if conc > 0 then
    redis.call('ZREMRANGEBYSCORE', KEYS[2 * i], '-inf', now)
    active = redis.call('ZCARD', KEYS[2 * i])
  end
  if rpm > 0 and r < 1 then refuse(i, 1, wait(r, 1, rpm)) end
  if tpm > 0 and tokens > tpm then
    if too_large == 0 then too_large = i end
  elseif tpm > 0 and tokens > 0 and t < tokens then refuse(i, 2, wait(t, tokens, tpm)) end
  if conc > 0 and active >= conc then refuse(i, 3, 1) end
  state[i] = {rpm, tpm, conc, r, t}
end
if too_large > 0 then worst, worst_scope, worst_dim = 0, too_large, 4 end
local out = {worst_scope, worst_dim, bound(math.ceil(math.max(worst, 0) * 1000))}
for i = 1, n do
  local rpm, tpm, conc, r, t = unpack(state[i])
  if worst_scope == 0 then
    if rpm > 0 then r = r - 1 end
    if tpm > 0 then t = t - tokens end
    if rpm > 0 or tpm > 0 then save(KEYS[2 * i - 1], r, t, rpm, tpm) end
    if conc > 0 then
      redis.call('ZADD', KEYS[2 * i], now + ttl, lease)
      redis.call('PEXPIRE', KEYS[2 * i], math.ceil(ttl * 1000) + 1000)
    end
  end
  local r_reset, t_reset = 0, 0
  if rpm > 0 then r_reset = math.ceil(wait(r, rpm, rpm) * 1000) end
  if tpm > 0 then t_reset = math.ceil(wait(t, tpm, tpm) * 1000) end
  table.insert(out, bound(math.floor(r)))
  table.insert(out, bound(r_reset))
  table.insert(out, bound(math.floor(t)))
  table.insert(out, bound(t_reset))
end
return out
"""
)

# KEYS: bucket, leases per scope. ARGV: lease id, token delta, estimated tokens, then rpm, tpm per scope.
# The correction is `rate.correction`: one request never takes more than the whole bucket.
FINISH = (
    _COMMON
    + """
local lease, delta, estimated = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
for i = 1, (#KEYS / 2) do
  local rpm, tpm = tonumber(ARGV[2 + 2 * i]), tonumber(ARGV[3 + 2 * i])
  redis.call('ZREM', KEYS[2 * i], lease)
  local d = math.min(delta, math.max(0, tpm - estimated))
  if tpm > 0 and d ~= 0 then
    local h = redis.call('HMGET', KEYS[2 * i - 1], 'r', 't', 'at')
    local last = tonumber(h[3])
    save(KEYS[2 * i - 1], refill(h[1], last, rpm), math.min(tpm, refill(h[2], last, tpm) - d), rpm, tpm)
  end
end
return 1
"""
)


# KEYS: bucket, leases per scope. ARGV: lease id, tokens, then rpm, tpm per scope. Gives back what
# ACQUIRE took (one request, `tokens`, the slot): a cluster's request that a later scope refused.
UNDO = (
    _COMMON
    + """
local lease, tokens = ARGV[1], tonumber(ARGV[2])
for i = 1, (#KEYS / 2) do
  local rpm, tpm = tonumber(ARGV[1 + 2 * i]), tonumber(ARGV[2 + 2 * i])
  redis.call('ZREM', KEYS[2 * i], lease)
  if rpm > 0 or tpm > 0 then
    local h = redis.call('HMGET', KEYS[2 * i - 1], 'r', 't', 'at')
    local last = tonumber(h[3])
    local r, t = refill(h[1], last, rpm), refill(h[2], last, tpm)
    if rpm > 0 then r = math.min(rpm, r + 1) end
    if tpm > 0 then t = math.min(tpm, t + tokens) end
    save(KEYS[2 * i - 1], r, t, rpm, tpm)
  end
end
return 1
"""
)


class RedisRateLimiter:
    def __init__(self, client: RedisClient, *, prefix: str, lease_ttl_s: float = 900.0) -> None:
        self._prefix = prefix
        self._lease_ttl_ms = round(lease_ttl_s * 1000)
        self._cluster = is_cluster(client)
        self._client = client
        self._acquire = client.register_script(ACQUIRE)
        self._finish = client.register_script(FINISH)
        self._undo = client.register_script(UNDO)

    async def acquire(self, scopes: Sequence[Scope], tokens: int, lease_id: str) -> RateDecision:
        if not scopes:
            return RateDecision()
        if not self._cluster or len(scopes) == 1:
            return combine(*await self._acquire_together(scopes, tokens, lease_id))
        outcomes: list[ScopeOutcome] = []
        for taken, scope in enumerate(scopes):  # one slot per scope: one script each, in turn
            outcome, refusal = await self._acquire_together([scope], tokens, lease_id)
            outcomes += outcome
            if refusal is not None:
                if taken:
                    await self._give_back(scopes[:taken], tokens, lease_id)
                return combine(outcomes, refusal)
        return combine(outcomes, None)

    async def _acquire_together(
        self, scopes: Sequence[Scope], tokens: int, lease_id: str
    ) -> tuple[list[ScopeOutcome], Refusal | None]:
        args: list[str | int] = [tokens, lease_id, self._lease_ttl_ms]
        for scope in scopes:
            limits = scope.limits
            args += [limits.rpm or 0, limits.tpm or 0, limits.concurrent or 0]
        reply = [int(value) for value in await self._acquire(keys=self._keys(scopes), args=args)]
        refusal = _refusal(scopes, reply[0], reply[1], reply[2])
        return [_outcome(scope, reply[3 + 4 * i : 7 + 4 * i]) for i, scope in enumerate(scopes)], refusal

    async def _give_back(self, scopes: Sequence[Scope], tokens: int, lease_id: str) -> None:
        for scope in scopes:
            await self._undo(
                keys=self._keys([scope]), args=[lease_id, tokens, scope.limits.rpm or 0, scope.limits.tpm or 0]
            )

    async def finish(self, scopes: Sequence[Scope], lease_id: str, token_delta: int, estimated: int = 0) -> None:
        if not scopes:
            return
        for group in [[scope] for scope in scopes] if self._cluster else [scopes]:
            args: list[str | int] = [lease_id, token_delta, estimated]
            for scope in group:
                args += [scope.limits.rpm or 0, scope.limits.tpm or 0]
            await self._finish(keys=self._keys(group), args=args)

    def _keys(self, scopes: Sequence[Scope]) -> list[str]:
        keys: list[str] = []
        for scope in scopes:
            base = f"{self._prefix}rate:{slot_tag(self._client, scope.id)}"
            keys += [base, base + ":leases"]
        return keys


def _refusal(scopes: Sequence[Scope], scope_number: int, dimension: int, wait_ms: int) -> Refusal | None:
    if scope_number == 0:
        return None
    scope = scopes[scope_number - 1]
    if dimension == _TOO_LARGE:
        return too_large(scope, scope.limits.tpm or 0)
    name: Dimension = DIMENSIONS[dimension - 1]
    limit = {"requests": scope.limits.rpm, "tokens": scope.limits.tpm, "concurrent": scope.limits.concurrent}[name]
    return refusal_for(scope, name, limit or 0, wait_ms / 1000)


def _outcome(scope: Scope, numbers: list[int]) -> ScopeOutcome:
    requests, requests_reset_ms, tokens, tokens_reset_ms = numbers
    limits = scope.limits
    return ScopeOutcome(
        requests=Bucket(limits.rpm, requests, requests_reset_ms / 1000) if limits.rpm else None,
        tokens=Bucket(limits.tpm, tokens, tokens_reset_ms / 1000) if limits.tpm else None,
    )
