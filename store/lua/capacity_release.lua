-- A request done: its lease returned, its tokens reconciled with the provider's count,
-- and on success the learned limits grow again (the additive half of AIMD), never past
-- what the operator declared. With renew_until_ms > 0, only the lease is extended.
-- A request without a spec scope names scope keys that do not exist.
-- KEYS and ARGV by name, in the order of ReleaseKeys and ReleaseArgs (script_capacity.py):
local state_key = KEYS[1]
local leases_key = KEYS[2]
local scope_state_key = KEYS[3]
local scope_leases_key = KEYS[4]
local lease_id = ARGV[1]
local extra_tokens = ARGV[2]
local succeeded = ARGV[3]
local declared_rpm = ARGV[4]
local declared_in_flight = ARGV[5]
local renew_until_ms = ARGV[6]
local told_rpm = ARGV[7]

local renew_until = tonumber(renew_until_ms)
if renew_until > 0 then
  -- Extend a live request's lease (XX: one already returned stays returned).
  redis.call('ZADD', scope_leases_key, 'XX', renew_until, lease_id)
  return redis.call('ZADD', leases_key, 'XX', 'CH', renew_until, lease_id)
end
redis.call('ZREM', scope_leases_key, lease_id)
local removed = redis.call('ZREM', leases_key, lease_id)
if removed == 0 then return 0 end
local extra = tonumber(extra_tokens)
for _, bucket in ipairs({state_key, scope_state_key}) do
  if extra ~= 0 and redis.call('HEXISTS', bucket, 'tok_tokens') == 1 then
    redis.call('HINCRBYFLOAT', bucket, 'tok_tokens', -extra)
  end
end
if succeeded == '1' then
  local f = redis.call('HMGET', state_key, 'learned_rpm', 'learned_inflight', 'rpm_ceiling')
  local rpm, inflight = tonumber(f[1]) or 0, tonumber(f[2]) or 0
  local rpm_cap, inflight_cap = tonumber(declared_rpm), tonumber(declared_in_flight)
  -- Just under the limit the provider named (capacity_throttled.lua): no higher. A
  -- provider that names it in every answer (OpenAI, Anthropic) is believed from the
  -- first: the rate starts just under it (or comes down to it) before any 429.
  local ceiling = tonumber(f[3]) or 0
  local told = tonumber(told_rpm)
  if told > 0 and math.abs(told * TOLD_MARGIN - ceiling) >= 0.01 then
    ceiling = told * TOLD_MARGIN
    if rpm <= 0 or rpm > ceiling then rpm = ceiling end
    redis.call('HSET', state_key, 'rpm_ceiling', tostring(ceiling))  -- the rate: below
    redis.call('PEXPIRE', state_key, 86400000)
  end
  if ceiling > 0 and (rpm_cap <= 0 or ceiling < rpm_cap) then rpm_cap = ceiling end
  if rpm > 0 then
    -- One more request a minute for every request that went through.
    rpm = rpm + 1
    if rpm_cap > 0 and rpm >= rpm_cap then rpm = rpm_cap end
    redis.call('HSET', state_key, 'learned_rpm', tostring(rpm))
  end
  if inflight > 0 then
    -- One more at once for every `limit` requests that went through.
    inflight = inflight + 1 / inflight
    if inflight_cap > 0 and inflight >= inflight_cap then inflight = inflight_cap end
    redis.call('HSET', state_key, 'learned_inflight', tostring(inflight))
  end
end
return 1
