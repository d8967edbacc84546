// Lua run inside Redis, so every replica sees one atomic decision. Time comes from Redis itself
// (TIME), never from a replica's clock. A workspace's keys share one hash tag.
//
// What a workspace's limits count is held by replicas: each API process holds, per workspace, a
// number of slots and of cents (its calls in flight plus a small reserve) and a share of the
// window's allowance. A replica admits its calls against its holding without asking Redis, and asks
// only when the holding cannot cover a call (see workspace-lease.ts).
//
// inflight (ZSET): holder -> lease expiry (ms). slots (HASH): holder -> slots held.
// spend (HASH): holder -> cents held. window (HASH): start, count of the fixed window the allowance
// is counted in (calls admitted plus the replicas' unused shares), and until when the workspace is
// contended (a call was refused: no reserves or shares then).
// Expired leases are a crashed replica's holdings: they are dropped before every decision.

/**
 * KEYS: inflight, slots, spend, window.
 * ARGV: maxConcurrent, spendCap, windowCalls, windowMs, leaseMs, holder, usedSlots, usedCents,
 * floorSlots, floorCents, heldWindowStart, windowReturned, wantSlots, wantCents, wantWindow, then
 * the cost of each call to decide.
 *
 * The holder's calls in flight (used*) are counted as they are; the rest of its holding is not, so
 * its own reserve never refuses its own call. The calls are decided in order, each as if it came
 * alone, against everything held by the other replicas. The holder then holds its calls in flight,
 * the ones admitted, and a reserve of what it asked for (want*) but at most a quarter of what is
 * still free, and never less than floor* (what it may admit against while this runs). Unused
 * window shares it gives back (windowReturned, of the window heldWindowStart) leave the count.
 *
 * Returns {verdict, a, b} per call, flat: ok (in flight, committed cents) / rate_limited (used, ms
 * until the window rolls) / concurrency (in flight) / spend (committed cents); then the holding:
 * slots, cents, the reserve allowed beyond the calls in flight (slots, cents), window share granted,
 * window start, ms until the window rolls, and 1 while the workspace is contended (give back every
 * reserve and unused share), else 0.
 */
export const LEASE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
for i = 1, #expired, 500 do
  local batch = {unpack(expired, i, math.min(i + 499, #expired))}
  redis.call('ZREM', KEYS[1], unpack(batch))
  redis.call('HDEL', KEYS[2], unpack(batch))
  redis.call('HDEL', KEYS[3], unpack(batch))
end
local maxConcurrent = tonumber(ARGV[1])
local spendCap = tonumber(ARGV[2])
local windowCalls = tonumber(ARGV[3])
local windowMs = tonumber(ARGV[4])
local lease = tonumber(ARGV[5])
local holder = ARGV[6]
local mySlots = tonumber(ARGV[7])
local myCents = tonumber(ARGV[8])
local windowStart = now - (now % windowMs)
local w = redis.call('HMGET', KEYS[4], 'start', 'count', 'contended')
local contended = (tonumber(w[3]) or 0) > now
local used = 0
if tonumber(w[1]) == windowStart then used = tonumber(w[2]) or 0 end
if tonumber(ARGV[11]) == windowStart then used = math.max(0, used - tonumber(ARGV[12])) end
local inflight = mySlots - tonumber(redis.call('HGET', KEYS[2], holder) or '0')
for _, v in ipairs(redis.call('HVALS', KEYS[2])) do inflight = inflight + tonumber(v) end
local committed = myCents - tonumber(redis.call('HGET', KEYS[3], holder) or '0')
for _, v in ipairs(redis.call('HVALS', KEYS[3])) do committed = committed + tonumber(v) end
local out = {}
local refused = false
for i = 16, #ARGV do
  local cost = tonumber(ARGV[i])
  if used >= windowCalls then
    refused = true
    table.insert(out, 'rate_limited'); table.insert(out, used); table.insert(out, windowStart + windowMs - now)
  elseif inflight >= maxConcurrent then
    refused = true
    table.insert(out, 'concurrency'); table.insert(out, inflight); table.insert(out, 0)
  elseif committed + cost > spendCap then
    refused = true
    table.insert(out, 'spend'); table.insert(out, committed); table.insert(out, 0)
  else
    used = used + 1
    inflight = inflight + 1
    committed = committed + cost
    mySlots = mySlots + 1
    myCents = myCents + cost
    table.insert(out, 'ok'); table.insert(out, inflight); table.insert(out, committed)
  end
end
-- A quarter of what is free at most: the other replicas always find most of it.
local reserveSlots = math.max(0, math.min(tonumber(ARGV[13]), math.floor((maxConcurrent - inflight) / 4)))
local reserveCents = math.max(0, math.min(tonumber(ARGV[14]), math.floor((spendCap - committed) / 4)))
local share = math.max(0, math.min(tonumber(ARGV[15]), math.floor((windowCalls - used) / 4)))
-- A call was refused: for a second no replica keeps a reserve or a share of the window, so what
-- they hold beyond their calls in flight comes back (each asks about every 100 ms while it has any).
if refused then
  contended = true
  redis.call('HSET', KEYS[4], 'contended', now + 1000)
  redis.call('PEXPIRE', KEYS[4], math.max(windowMs, 1000))
end
if contended then
  reserveSlots = 0
  reserveCents = 0
  share = 0
end
mySlots = math.max(tonumber(ARGV[9]), mySlots + reserveSlots)
myCents = math.max(tonumber(ARGV[10]), myCents + reserveCents)
used = used + share
if mySlots > 0 or myCents > 0 then
  redis.call('ZADD', KEYS[1], now + lease, holder)
  redis.call('HSET', KEYS[2], holder, mySlots)
  redis.call('HSET', KEYS[3], holder, myCents)
  redis.call('PEXPIRE', KEYS[1], lease)
  redis.call('PEXPIRE', KEYS[2], lease)
  redis.call('PEXPIRE', KEYS[3], lease)
else
  redis.call('ZREM', KEYS[1], holder)
  redis.call('HDEL', KEYS[2], holder)
  redis.call('HDEL', KEYS[3], holder)
end
if used > 0 or tonumber(w[1]) == windowStart then
  redis.call('HSET', KEYS[4], 'start', windowStart, 'count', used)
  redis.call('PEXPIRE', KEYS[4], windowMs)
end
table.insert(out, mySlots); table.insert(out, myCents); table.insert(out, reserveSlots); table.insert(out, reserveCents); table.insert(out, share)
table.insert(out, windowStart); table.insert(out, windowStart + windowMs - now)
table.insert(out, contended and 1 or 0)
return out
`;
