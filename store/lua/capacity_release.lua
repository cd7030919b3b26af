-- A request done: its lease returned, its tokens reconciled with the provider's count,
-- and on success the learned limits grow again (the additive half of AIMD), never past
-- what the operator declared.
-- KEYS: 1 state hash, 2 leases zset
-- ARGV: 1 lease id, 2 tokens used minus estimated, 3 succeeded 0|1, 4 declared rpm,
--       5 declared in flight, 6 renew only: new expiry ms (0: release)
local state, leases = KEYS[1], KEYS[2]
local renew_until = tonumber(ARGV[6])
if renew_until > 0 then
  -- Extend a live request's lease (XX: one already returned stays returned).
  return redis.call('ZADD', leases, 'XX', 'CH', renew_until, ARGV[1])
end
local removed = redis.call('ZREM', leases, ARGV[1])
if removed == 0 then return 0 end
local extra = tonumber(ARGV[2])
if extra ~= 0 and redis.call('HEXISTS', state, 'tok_tokens') == 1 then
  redis.call('HINCRBYFLOAT', state, 'tok_tokens', -extra)
end
if ARGV[3] == '1' then
  local f = redis.call('HMGET', state, 'learned_rpm', 'learned_inflight')
  local rpm, inflight = tonumber(f[1]) or 0, tonumber(f[2]) or 0
  local rpm_cap, inflight_cap = tonumber(ARGV[4]), tonumber(ARGV[5])
  if rpm > 0 then
    -- One more request a minute for every request that went through.
    rpm = rpm + 1
    if rpm_cap > 0 and rpm >= rpm_cap then rpm = rpm_cap end
    redis.call('HSET', state, 'learned_rpm', tostring(rpm))
  end
  if inflight > 0 then
    -- One more at once for every `limit` requests that went through.
    inflight = inflight + 1 / inflight
    if inflight_cap > 0 and inflight >= inflight_cap then inflight = inflight_cap end
    redis.call('HSET', state, 'learned_inflight', tostring(inflight))
  end
end
return 1
