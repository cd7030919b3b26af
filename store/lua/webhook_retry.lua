-- An operator's retry: a dead or pending entry is due now, with a fresh age budget
-- (`entry`, the caller's JSON). Returns {'ok', state it was in}, {'missing'},
-- {'in_flight'} (leased: a delivery is under way) or {'delivered'}.
-- KEYS and ARGV by name, in the order of RetryKeys and RetryArgs (webhooks.py):
local outbox_key = KEYS[1]
local pending_key = KEYS[2]
local leased_key = KEYS[3]
local dead_key = KEYS[4]
local delivered_key = KEYS[5]
local entry_id = ARGV[1]
local entry = ARGV[2]
local now_ms = ARGV[3]

if redis.call('HEXISTS', outbox_key, entry_id) == 0 then return {'missing'} end
if redis.call('ZSCORE', leased_key, entry_id) then return {'in_flight'} end
if redis.call('ZSCORE', delivered_key, entry_id) then return {'delivered'} end
local was = 'pending'
if redis.call('ZREM', dead_key, entry_id) == 1 then was = 'dead' end
redis.call('HSET', outbox_key, entry_id, entry)
redis.call('ZADD', pending_key, now_ms, entry_id)
return {'ok', was}
