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
 * KEYS: inflight, spend, window. ARGV: maxConcurrent, spendCap, windowCalls, windowMs, leaseMs,
 * then a slot and its cost for each call. Decides the calls in order, each as if it came alone
 * (one script for a burst of one workspace's calls: a script's own cost in Redis is several times
 * that of its commands). Returns {verdict, a, b} per call, flat: ok (in flight, committed cents) /
 * rate_limited (used, ms until the window rolls) / concurrency (in flight) / spend (committed cents).
 */
export const ACQUIRE = `${NOW}${PRUNE}
local maxConcurrent = tonumber(ARGV[1])
local spendCap = tonumber(ARGV[2])
local windowCalls = tonumber(ARGV[3])
local windowMs = tonumber(ARGV[4])
local lease = tonumber(ARGV[5])
local windowStart = now - (now % windowMs)
local w = redis.call('HMGET', KEYS[3], 'start', 'count')
local used = 0
if tonumber(w[1]) == windowStart then used = tonumber(w[2]) or 0 end
local inflight = redis.call('ZCARD', KEYS[1])
local committed = 0
for _, v in ipairs(redis.call('HVALS', KEYS[2])) do committed = committed + tonumber(v) end
local verdicts, leases, costs = {}, {}, {}
for i = 6, #ARGV, 2 do
  local cost = tonumber(ARGV[i + 1])
  if used >= windowCalls then
    table.insert(verdicts, 'rate_limited'); table.insert(verdicts, used); table.insert(verdicts, windowStart + windowMs - now)
  elseif inflight >= maxConcurrent then
    table.insert(verdicts, 'concurrency'); table.insert(verdicts, inflight); table.insert(verdicts, 0)
  elseif committed + cost > spendCap then
    table.insert(verdicts, 'spend'); table.insert(verdicts, committed); table.insert(verdicts, 0)
  else
    used = used + 1
    inflight = inflight + 1
    committed = committed + cost
    table.insert(leases, now + lease); table.insert(leases, ARGV[i])
    table.insert(costs, ARGV[i]); table.insert(costs, ARGV[i + 1])
    table.insert(verdicts, 'ok'); table.insert(verdicts, inflight); table.insert(verdicts, committed)
  end
end
if #leases > 0 then
  redis.call('ZADD', KEYS[1], unpack(leases))
  redis.call('HSET', KEYS[2], unpack(costs))
  redis.call('PEXPIRE', KEYS[1], lease)
  redis.call('PEXPIRE', KEYS[2], lease)
  redis.call('HSET', KEYS[3], 'start', windowStart, 'count', used)
  redis.call('PEXPIRE', KEYS[3], windowMs)
end
return verdicts
`;

/** KEYS: inflight, spend. ARGV: slot... Frees the slots. */
export const RELEASE = `
redis.call('ZREM', KEYS[1], unpack(ARGV))
redis.call('HDEL', KEYS[2], unpack(ARGV))
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
