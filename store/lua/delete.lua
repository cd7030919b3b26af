-- Delete a session and every key it owns.
-- KEYS: 1 meta, 2 conversation set, 3 journal set, 4 idempotency key (or dummy),
--       5 the spec-hash index, then the session's other keys, then the six index keys.
-- ARGV: 1 sid, 2 conversation key prefix, 3 number of "other" keys, 4 journal key prefix
local sid = ARGV[1]
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local idem = redis.call('HGET', KEYS[1], 'idempotency_key')
if idem and idem ~= '' then redis.call('DEL', KEYS[4]) end
for _, lane in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  redis.call('DEL', ARGV[2] .. lane)
end
for _, step in ipairs(redis.call('SMEMBERS', KEYS[3])) do
  redis.call('DEL', ARGV[4] .. step)
end
local idx = index_keys()
for _, s in ipairs(STATUSES) do redis.call('ZREM', idx[s], sid) end
redis.call('ZREM', idx.all, sid)
redis.call('ZREM', KEYS[5], sid)
local n = tonumber(ARGV[3])
for i = 6, 5 + n do redis.call('DEL', KEYS[i]) end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
return 1
