-- The end of one delivery attempt, only while its lease holds (the score it was leased
-- with): 'delivered' (kept among the newest `keep_delivered`), 'retry' (pending again,
-- due at `due_ms`) or 'dead'. The entry's JSON is replaced by the caller's (attempts,
-- last error). Returns 1, or 0 when the lease was lost (another deliverer has it).
-- KEYS and ARGV by name, in the order of SettleKeys and SettleArgs (webhooks.py):
local outbox_key = KEYS[1]
local pending_key = KEYS[2]
local leased_key = KEYS[3]
local dead_key = KEYS[4]
local delivered_key = KEYS[5]
local entry_id = ARGV[1]
local lease_until_ms = ARGV[2]
local outcome = ARGV[3]
local entry = ARGV[4]
local due_ms = ARGV[5]
local now_ms = ARGV[6]
local keep_delivered = ARGV[7]

local held = redis.call('ZSCORE', leased_key, entry_id)
if not held or tonumber(held) ~= tonumber(lease_until_ms) then return 0 end
redis.call('ZREM', leased_key, entry_id)
redis.call('HSET', outbox_key, entry_id, entry)
if outcome == 'delivered' then
  redis.call('ZADD', delivered_key, now_ms, entry_id)
  local extra = redis.call('ZCARD', delivered_key) - tonumber(keep_delivered)
  if extra > 0 then
    for _, old in ipairs(redis.call('ZRANGE', delivered_key, 0, extra - 1)) do
      redis.call('HDEL', outbox_key, old)
    end
    redis.call('ZREMRANGEBYRANK', delivered_key, 0, extra - 1)
  end
elseif outcome == 'retry' then
  redis.call('ZADD', pending_key, due_ms, entry_id)
else
  redis.call('ZADD', dead_key, now_ms, entry_id)
end
return 1
