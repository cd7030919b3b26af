-- Move due timers (retry backoff, HITL timeouts) onto the step stream. Atomic, so any
-- number of workers and schedulers may promote concurrently without duplicates.
-- `only_session`: a session id: only that session's timers (`durable run` touches no
-- other session's), looking at no more than 10 x limit due timers of others; '' or
-- absent: every session's.
-- Returns {timers moved, 1 if the shard has fair-dispatch state (`fair_on_key`,
-- `fair_ready_key`: _lib.lua) else 0}: a worker's takes look for it only then.
-- KEYS and ARGV by name, in the order of PromoteTimersKeys and PromoteTimersArgs (script_step.py):
local timers_key = KEYS[1]
local stream_key = KEYS[2]
local fair_on_key = KEYS[3]
local fair_ready_key = KEYS[4]
local now_ms = ARGV[1]
local limit = ARGV[2]
local only_session = ARGV[3]

local fair = redis.call('EXISTS', fair_on_key, fair_ready_key) > 0 and 1 or 0
local max = tonumber(limit)
local only = only_session or ''
if only == '' then
  local due = redis.call('ZRANGEBYSCORE', timers_key, '-inf', now_ms, 'LIMIT', 0, max)
  for _, job in ipairs(due) do
    enqueue(stream_key, job)
    redis.call('ZREM', timers_key, job)
  end
  return {#due, fair}
end
local needle = '"session_id":"' .. only .. '"'
local moved, skipped = 0, 0
while skipped < 10 * max do
  local due = redis.call('ZRANGEBYSCORE', timers_key, '-inf', now_ms, 'LIMIT', skipped, max)
  for _, job in ipairs(due) do
    if string.find(job, needle, 1, true) and cjson.decode(job)['session_id'] == only then
      enqueue(stream_key, job)
      redis.call('ZREM', timers_key, job)
      moved = moved + 1
    else
      skipped = skipped + 1
    end
  end
  if #due < max then break end
end
return {moved, fair}
