-- Append each session's batch to its live stream, only while the session exists: a batch
-- flushed after the session was deleted must not make its stream again (a delete leaves
-- nothing behind; delete.lua removes the stream with the rest). One call for all the
-- sessions of a shard (their keys share its slot): a worker flushes every window, and a
-- call per session was most of the stream's cost to the worker. Entries capped (MAXLEN,
-- approximate); each stream expires ttl_s after its last write. Returns the number of
-- sessions written.
-- KEYS and ARGV by name, in the order of LiveAppendKeys and LiveAppendArgs (script_operator.py):
local sessions_at = 1  -- KEYS[sessions_at..]: sessions
local maxlen = ARGV[1]
local ttl_s = ARGV[2]
local batches_at = 3  -- ARGV[batches_at..]: batches

local written = 0
local i = batches_at
for k = 1, (#KEYS - sessions_at + 1) / 2 do
  local meta_key = KEYS[sessions_at + 2 * k - 2]
  local live_key = KEYS[sessions_at + 2 * k - 1]
  local alive = redis.call('EXISTS', meta_key) == 1
  local count = tonumber(ARGV[i])
  i = i + 1
  for _ = 1, count do
    local n = tonumber(ARGV[i])
    if alive then
      redis.call('XADD', live_key, 'MAXLEN', '~', maxlen, '*', unpack(ARGV, i + 1, i + n))
    end
    i = i + n + 1
  end
  if alive then
    redis.call('EXPIRE', live_key, ttl_s)
    written = written + 1
  end
end
return written
