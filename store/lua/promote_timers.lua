-- Move due timers (retry backoff, HITL timeouts) onto the step stream. Atomic, so any
-- number of workers and schedulers may promote concurrently without duplicates.
-- KEYS: 1 timers, 2 stream. ARGV: 1 now ms, 2 limit, 3 a session id: only that
-- session's timers (`durable run` touches no other session's), looking at no more
-- than 10 x limit due timers of others; '' or absent: every session's.
local limit = tonumber(ARGV[2])
local only = ARGV[3] or ''
if only == '' then
  local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, limit)
  for _, job in ipairs(due) do
    enqueue(KEYS[2], job)
    redis.call('ZREM', KEYS[1], job)
  end
  return #due
end
local needle = '"session_id":"' .. only .. '"'
local moved, skipped = 0, 0
while skipped < 10 * limit do
  local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', skipped, limit)
  for _, job in ipairs(due) do
    if string.find(job, needle, 1, true) and cjson.decode(job)['session_id'] == only then
      enqueue(KEYS[2], job)
      redis.call('ZREM', KEYS[1], job)
      moved = moved + 1
    else
      skipped = skipped + 1
    end
  end
  if #due < limit then break end
end
return moved
