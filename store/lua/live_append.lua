-- Append one session's batch to its live stream, only while the session exists: a batch
-- flushed after the session was deleted must not make its stream again (a delete leaves
-- nothing behind; delete.lua removes the stream with the rest). Entries capped (MAXLEN,
-- approximate); the stream expires ttl_s after its last write.
-- KEYS and ARGV by name, in the order of LiveAppendKeys and LiveAppendArgs (script_operator.py):
local meta_key = KEYS[1]
local live_key = KEYS[2]
local maxlen = ARGV[1]
local ttl_s = ARGV[2]
local entries_at = 3  -- ARGV[entries_at..]: entries

if redis.call('EXISTS', meta_key) == 0 then return 0 end
local i = entries_at
while i <= #ARGV do
  local n = tonumber(ARGV[i])
  redis.call('XADD', live_key, 'MAXLEN', '~', maxlen, '*', unpack(ARGV, i + 1, i + n))
  i = i + n + 1
end
redis.call('EXPIRE', live_key, ttl_s)
return 1
