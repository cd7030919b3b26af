-- Take one model request's share of a provider key's capacity, or say how long to wait.
-- The key's state is shared by the whole fleet: declared limits (the operator's, passed
-- by every caller), the limits learned from throttling (capacity_throttled.lua), a
-- request bucket, a token bucket, the leases of requests in flight (each expires by
-- itself: a worker that dies returns its share within lease_ttl) and a shared backoff.
-- KEYS: 1 state hash, 2 leases zset
-- ARGV: 1 now ms, 2 lease id, 3 lease ttl ms, 4 estimated tokens,
--       5 declared rpm, 6 declared tpm, 7 declared in flight (0: none),
--       8 wait cap ms (the longest wait one reply advises)
-- Reply: {granted 0|1, wait ms, reason, rpm in force, in flight limit in force, in flight}
local state, leases = KEYS[1], KEYS[2]
local now = tonumber(ARGV[1])
local lease_id, ttl = ARGV[2], tonumber(ARGV[3])
local est = tonumber(ARGV[4])
local rpm_declared, tpm, inflight_declared = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local wait_cap = tonumber(ARGV[8])

local f = redis.call('HMGET', state, 'learned_rpm', 'learned_inflight', 'req_tokens', 'req_ts',
  'tok_tokens', 'tok_ts', 'backoff_until', 'obs_count', 'obs_start')
local learned_rpm, learned_inflight = tonumber(f[1]) or 0, tonumber(f[2]) or 0
local req_tokens, req_ts = tonumber(f[3]), tonumber(f[4]) or now
local tok_tokens, tok_ts = tonumber(f[5]), tonumber(f[6]) or now
local backoff_until = tonumber(f[7]) or 0
local obs_count, obs_start = tonumber(f[8]) or 0, tonumber(f[9]) or now

local function smallest(a, b)
  if a <= 0 then return b end
  if b <= 0 then return a end
  return math.min(a, b)
end
local rpm = smallest(rpm_declared, learned_rpm)
local inflight_limit = math.floor(smallest(inflight_declared, learned_inflight))

redis.call('ZREMRANGEBYSCORE', leases, '-inf', now)
local inflight = redis.call('ZCARD', leases)

local function wait(ms, reason)
  return {0, math.max(1, math.min(wait_cap, math.ceil(ms))), reason, tostring(rpm),
          inflight_limit, inflight}
end

if backoff_until > now then return wait(backoff_until - now, 'backoff') end
if inflight_limit > 0 and inflight >= inflight_limit then
  -- A lease ends when its request does: look again soon (a slice of the earliest expiry).
  local first = redis.call('ZRANGE', leases, 0, 0, 'WITHSCORES')
  local until_expiry = first[2] and (tonumber(first[2]) - now) or 100
  return wait(math.min(100, until_expiry), 'in_flight')
end

-- Requests: a bucket refilled at rpm/60 a second, holding a tenth of a second's worth:
-- providers enforce a minute's limit over short windows too, so requests are spread out.
local req_left = nil
if rpm > 0 then
  local rate = rpm / 60000  -- per ms
  local burst = math.max(1, rpm / 600)
  req_left = math.min(burst, (req_tokens or burst) + (now - req_ts) * rate)
  if req_left < 1 then return wait((1 - req_left) / rate, 'requests_per_minute') end
end
-- Tokens: refilled at tpm/60 a second, holding ten seconds' worth (at least this request).
local tok_left = nil
if tpm > 0 then
  local rate = tpm / 60000
  local burst = math.max(est, tpm / 6)
  tok_left = math.min(burst, (tok_tokens or burst) + (now - tok_ts) * rate)
  if tok_left < est then return wait((est - tok_left) / rate, 'tokens_per_minute') end
end

if req_left then redis.call('HSET', state, 'req_tokens', tostring(req_left - 1), 'req_ts', now) end
if tok_left then redis.call('HSET', state, 'tok_tokens', tostring(tok_left - est), 'tok_ts', now) end
-- The request rate seen lately: what a first throttle halves when nothing is declared.
if now - obs_start > 10000 then
  redis.call('HSET', state, 'obs_prev', obs_count / math.max(1, now - obs_start) * 60000)
  obs_count, obs_start = 0, now
end
redis.call('HSET', state, 'obs_count', obs_count + 1, 'obs_start', obs_start)
redis.call('HINCRBY', state, 'granted', 1)
redis.call('ZADD', leases, now + ttl, lease_id)
redis.call('PEXPIRE', state, 86400000)
redis.call('PEXPIRE', leases, 86400000)
return {1, 0, '', tostring(rpm), inflight_limit, inflight + 1}
