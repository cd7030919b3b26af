-- Lease up to `limit` due webhook entries for delivery: first those whose lease lapsed
-- (their deliverer died), then those due. A leased entry is in `leased` only, its
-- score the lease's expiry, which the settle script checks as the lease's token.
-- Returns {id, entry JSON, id, entry JSON, ...}.
-- KEYS and ARGV by name, in the order of ClaimKeys and ClaimArgs (webhooks.py):
local outbox_key = KEYS[1]
local pending_key = KEYS[2]
local leased_key = KEYS[3]
local now_ms = ARGV[1]
local lease_until_ms = ARGV[2]
local limit = ARGV[3]

for _, id in ipairs(redis.call('ZRANGE', leased_key, '-inf', now_ms, 'BYSCORE',
                                'LIMIT', 0, tonumber(limit))) do
  redis.call('ZREM', leased_key, id)
  redis.call('ZADD', pending_key, now_ms, id)
end
local out = {}
for _, id in ipairs(redis.call('ZRANGE', pending_key, '-inf', now_ms, 'BYSCORE',
                                'LIMIT', 0, tonumber(limit))) do
  redis.call('ZREM', pending_key, id)
  local entry = redis.call('HGET', outbox_key, id)
  if entry then
    redis.call('ZADD', leased_key, lease_until_ms, id)
    out[#out + 1] = id
    out[#out + 1] = entry
  end
end
return out
