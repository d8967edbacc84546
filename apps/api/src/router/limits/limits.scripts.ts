// Lua run inside Redis, so every replica sees one atomic decision per call. Time comes from Redis
// itself (TIME), never from a replica's clock. A workspace's keys share one hash tag.
//
// inflight (ZSET): slot id -> lease expiry (ms). spend (HASH): slot id -> cents committed.
// window (HASH): start, count of the fixed window the allowance is counted in.
// Expired leases are a crashed replica's slots: they are dropped before every decision.

const NOW = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`;

const PRUNE = `
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
for i = 1, #expired, 500 do
  local batch = {unpack(expired, i, math.min(i + 499, #expired))}
  redis.call('ZREM', KEYS[1], unpack(batch))
  redis.call('HDEL', KEYS[2], unpack(batch))
end
`;

/**
 * KEYS: inflight, spend, window. ARGV: slot, cost, maxConcurrent, spendCap, windowCalls, windowMs, leaseMs.
 * Returns {verdict, a, b}: ok / rate_limited (used, ms until the window rolls) / concurrency
 * (in flight) / spend (committed cents).
 */
export const ACQUIRE = `${NOW}${PRUNE}
local cost = tonumber(ARGV[2])
local windowMs = tonumber(ARGV[6])
local lease = tonumber(ARGV[7])
local windowStart = now - (now % windowMs)
local w = redis.call('HMGET', KEYS[3], 'start', 'count')
local used = 0
if tonumber(w[1]) == windowStart then used = tonumber(w[2]) or 0 end
if used >= tonumber(ARGV[5]) then
  return {'rate_limited', used, windowStart + windowMs - now}
end
local inflight = redis.call('ZCARD', KEYS[1])
if inflight >= tonumber(ARGV[3]) then
  return {'concurrency', inflight, 0}
end
local committed = 0
for _, v in ipairs(redis.call('HVALS', KEYS[2])) do committed = committed + tonumber(v) end
if committed + cost > tonumber(ARGV[4]) then
  return {'spend', committed, 0}
end
redis.call('ZADD', KEYS[1], now + lease, ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], cost)
redis.call('PEXPIRE', KEYS[1], lease)
redis.call('PEXPIRE', KEYS[2], lease)
redis.call('HSET', KEYS[3], 'start', windowStart, 'count', used + 1)
redis.call('PEXPIRE', KEYS[3], windowMs)
return {'ok', inflight + 1, committed + cost}
`;

/** KEYS: inflight, spend. ARGV: slot. */
export const RELEASE = `
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
return 1
`;

/** KEYS: inflight, spend. ARGV: leaseMs, slot... Extends the leases of slots still held. */
export const RENEW = `${NOW}
local lease = tonumber(ARGV[1])
for i = 2, #ARGV do
  redis.call('ZADD', KEYS[1], 'XX', now + lease, ARGV[i])
end
redis.call('PEXPIRE', KEYS[1], lease)
redis.call('PEXPIRE', KEYS[2], lease)
return 1
`;
