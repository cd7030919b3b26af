-- The provider said "too many": the whole fleet backs off for this key (one shared
-- Retry-After), and the learned limits shrink (the multiplicative half of AIMD), once per
-- backoff however many of the fleet's requests were refused together. The refused
-- request's lease is returned (its spec scope's too). told_rpm: the provider's own
-- requests-per-minute limit (0: unknown). Reply: {rpm in force (string), in flight limit}
--
-- A provider that names its limit is believed: the rate goes to just under it (never up
-- from a lower one), and successes grow it back no further (rpm_ceiling, read by
-- capacity_release.lua), so the fleet does not climb into the limit again and again,
-- each time paying a whole Retry-After. A throttle that came while the fleet sent faster
-- than that limit is the rate's, not the concurrency's: the requests-at-once limit is
-- learned (or shrunk) only from throttles the rate does not explain.
-- KEYS and ARGV by name, in the order of ThrottledKeys and ThrottledArgs (script_capacity.py):
local state_key = KEYS[1]
local leases_key = KEYS[2]
local scope_leases_key = KEYS[3]
local now_ms = ARGV[1]
local lease_id = ARGV[2]
local backoff_ms = ARGV[3]
local told_rpm = ARGV[4]
local decrease = ARGV[5]
local min_rpm = ARGV[6]

local now, backoff = tonumber(now_ms), tonumber(backoff_ms)
local told, factor, floor_rpm = tonumber(told_rpm), tonumber(decrease), tonumber(min_rpm)
local inflight = redis.call('ZCARD', leases_key)
redis.call('ZREM', leases_key, lease_id)
redis.call('ZREM', scope_leases_key, lease_id)
local f = redis.call('HMGET', state_key, 'learned_rpm', 'learned_inflight', 'backoff_until',
  'last_decrease', 'obs_count', 'obs_start', 'obs_prev')
local rpm, limit = tonumber(f[1]) or 0, tonumber(f[2]) or 0
local until_ms, last = tonumber(f[3]) or 0, tonumber(f[4]) or 0
redis.call('HINCRBY', state_key, 'throttled', 1)
redis.call('HSET', state_key, 'backoff_until', math.max(until_ms, now + backoff))
if last + math.max(backoff, 1000) <= now then
  local ceiling = told * TOLD_MARGIN
  local over_told = told > 0 and (rpm <= 0 or rpm > ceiling)
  if told > 0 then
    -- Never up: below the named limit already, the rate did not cause this one.
    if over_told then rpm = ceiling end
  else
    if rpm <= 0 then
      -- Nothing learned yet: start from the rate the fleet was sending at.
      local count, start = tonumber(f[5]) or 0, tonumber(f[6]) or now
      local seen = count / math.max(1000, now - start) * 60000
      rpm = math.max(seen, tonumber(f[7]) or 0)
    end
    rpm = rpm * factor
  end
  rpm = math.max(floor_rpm, rpm)
  if not over_told then
    if limit <= 0 then limit = inflight end
    limit = math.max(1, limit * factor)
    redis.call('HSET', state_key, 'learned_inflight', tostring(limit))
  end
  if told > 0 then redis.call('HSET', state_key, 'rpm_ceiling', tostring(ceiling)) end
  redis.call('HSET', state_key, 'learned_rpm', tostring(rpm), 'last_decrease', now,
    'req_tokens', '0', 'req_ts', now)
end
redis.call('PEXPIRE', state_key, 86400000)
return {tostring(rpm), math.floor(limit)}
