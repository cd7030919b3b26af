-- Delete a session and every key it owns. Every key is declared (so a Redis Cluster
-- answers ASK/TRYAGAIN before the script runs, never fails half-way through it): the
-- caller reads the lanes and journals first; if the sets changed since, nothing is
-- deleted and the reply is -1 (read again and retry).
-- KEYS from `others_at`: the session's other keys (`others_count`), the lanes' keys
-- (`lanes_count`), the journals' keys (`journals_count`), then the six index keys.
-- KEYS and ARGV by name, in the order of DeleteKeys and DeleteArgs (script_operator.py):
local meta_key = KEYS[1]
local conversations_key = KEYS[2]
local journals_key = KEYS[3]
local idempotency_key = KEYS[4]
local spec_index_key = KEYS[5]
local others_at = 6  -- KEYS[others_at..]: others
-- index: the last six KEYS, the status indexes (_lib.lua)
local session_id = ARGV[1]
local conversation_prefix = ARGV[2]
local others_count = ARGV[3]
local journal_prefix = ARGV[4]
local lanes_count = ARGV[5]
local journals_count = ARGV[6]
local lanes_at = others_at + tonumber(others_count)  -- KEYS[lanes_at..]: lanes
local journal_keys_at = lanes_at + tonumber(lanes_count)  -- KEYS[journal_keys_at..]: journal_keys

if redis.call('EXISTS', meta_key) == 0 then return 0 end
local lanes, journals = tonumber(lanes_count), tonumber(journals_count)
local last_journal = journal_keys_at + journals - 1
local declared = {}
for i = lanes_at, last_journal do declared[KEYS[i]] = true end
local function all_declared(set, prefix, count)
  local members = redis.call('SMEMBERS', set)
  if #members ~= count then return false end
  for _, m in ipairs(members) do
    if not declared[prefix .. m] then return false end
  end
  return true
end
if not (all_declared(conversations_key, conversation_prefix, lanes)
        and all_declared(journals_key, journal_prefix, journals)) then
  return -1
end
local idem = redis.call('HGET', meta_key, 'idempotency_key')
if idem and idem ~= '' then redis.call('DEL', idempotency_key) end
for i = lanes_at, last_journal do redis.call('DEL', KEYS[i]) end
local idx = index_keys()
for _, s in ipairs(STATUSES) do redis.call('ZREM', idx[s], session_id) end
redis.call('ZREM', idx.all, session_id)
redis.call('ZREM', spec_index_key, session_id)
for i = others_at, lanes_at - 1 do redis.call('DEL', KEYS[i]) end
redis.call('DEL', meta_key, conversations_key, journals_key)
return 1
