-- Delete a session and every key it owns. Every key is declared (so a Redis Cluster
-- answers ASK/TRYAGAIN before the script runs, never fails half-way through it): the
-- caller reads the lanes and journals first; if the sets changed since, nothing is
-- deleted and the reply is -1 (read again and retry).
-- KEYS: 1 meta, 2 conversation set, 3 journal set, 4 idempotency key (or dummy),
--       5 the spec-hash index, then the session's other keys, then the lanes' keys,
--       then the journals' keys, then the six index keys.
-- ARGV: 1 sid, 2 conversation key prefix, 3 number of "other" keys, 4 journal key prefix,
--       5 number of lane keys, 6 number of journal keys
local sid = ARGV[1]
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local others, lanes, journals = tonumber(ARGV[3]), tonumber(ARGV[5]), tonumber(ARGV[6])
local first_lane = 6 + others
local first_journal = first_lane + lanes
local declared = {}
for i = first_lane, first_journal + journals - 1 do declared[KEYS[i]] = true end
local function all_declared(set, prefix, count)
  local members = redis.call('SMEMBERS', set)
  if #members ~= count then return false end
  for _, m in ipairs(members) do
    if not declared[prefix .. m] then return false end
  end
  return true
end
if not (all_declared(KEYS[2], ARGV[2], lanes) and all_declared(KEYS[3], ARGV[4], journals)) then
  return -1
end
local idem = redis.call('HGET', KEYS[1], 'idempotency_key')
if idem and idem ~= '' then redis.call('DEL', KEYS[4]) end
for i = first_lane, first_journal + journals - 1 do redis.call('DEL', KEYS[i]) end
local idx = index_keys()
for _, s in ipairs(STATUSES) do redis.call('ZREM', idx[s], sid) end
redis.call('ZREM', idx.all, sid)
redis.call('ZREM', KEYS[5], sid)
for i = 6, 5 + others do redis.call('DEL', KEYS[i]) end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
return 1
