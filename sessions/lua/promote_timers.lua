-- Move due timers (retry backoff, HITL timeouts) onto the step stream. Atomic, so any
-- number of workers and schedulers may promote concurrently without duplicates.
-- KEYS: 1 timers, 2 stream. ARGV: 1 now ms, 2 limit
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for _, job in ipairs(due) do
  enqueue(KEYS[2], job)
  redis.call('ZREM', KEYS[1], job)
end
return #due
