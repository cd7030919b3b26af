-- The provider said "too many": the whole fleet backs off for this key (one shared
-- Retry-After), and the learned limits shrink (the multiplicative half of AIMD), once per
-- backoff however many of the fleet's requests were refused together.
-- KEYS: 1 state hash, 2 leases zset
-- ARGV: 1 now ms, 2 lease id, 3 backoff ms, 4 the provider's own rpm limit (0: unknown),
--       5 decrease factor (e.g. 0.7), 6 minimum rpm
-- Reply: {rpm in force (string), in flight limit}
local state, leases = KEYS[1], KEYS[2]
local now, backoff = tonumber(ARGV[1]), tonumber(ARGV[3])
local told_rpm, factor, min_rpm = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local inflight = redis.call('ZCARD', leases)
redis.call('ZREM', leases, ARGV[2])
local f = redis.call('HMGET', state, 'learned_rpm', 'learned_inflight', 'backoff_until',
  'last_decrease', 'obs_count', 'obs_start', 'obs_prev')
local rpm, limit = tonumber(f[1]) or 0, tonumber(f[2]) or 0
local until_ms, last = tonumber(f[3]) or 0, tonumber(f[4]) or 0
redis.call('HINCRBY', state, 'throttled', 1)
redis.call('HSET', state, 'backoff_until', math.max(until_ms, now + backoff))
if last + math.max(backoff, 1000) <= now then
  if told_rpm > 0 then
    rpm = told_rpm * 0.95
  else
    if rpm <= 0 then
      -- Nothing learned yet: start from the rate the fleet was sending at.
      local count, start = tonumber(f[5]) or 0, tonumber(f[6]) or now
      local seen = count / math.max(1000, now - start) * 60000
      rpm = math.max(seen, tonumber(f[7]) or 0)
    end
    rpm = rpm * factor
  end
  rpm = math.max(min_rpm, rpm)
  if limit <= 0 then limit = inflight end
  limit = math.max(1, limit * factor)
  redis.call('HSET', state, 'learned_rpm', tostring(rpm), 'learned_inflight', tostring(limit),
    'last_decrease', now, 'req_tokens', '0', 'req_ts', now)
end
redis.call('PEXPIRE', state, 86400000)
return {tostring(rpm), math.floor(limit)}
