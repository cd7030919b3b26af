-- A step's attempt failed: schedule its retry on the timer set, or fail the session.
-- KEYS: 1 meta, 2 events, 3 stream, 4 timers, 5 failed jobs, 6 results, then the six
--       index keys.
-- ARGV: 1 sid, 2 step, 3 entry id, 4 group, 5 consumer, 6 mode (retry|fail),
--       7 due ms, 8 retry job JSON, 9 this job JSON, 10 error, 11 now iso, 12 now ms,
--       13 events (JSON array), 14 events max
local meta, stream, group, entry = KEYS[1], KEYS[3], ARGV[4], ARGV[3]
if not owns(stream, group, entry, ARGV[5]) then return {'stale'} end
ack(stream, group, entry)
local status = redis.call('HGET', meta, 'status')
if not status then return {'gone'} end
if redis.call('HEXISTS', KEYS[6], ARGV[2]) == 1 then return {'duplicate'} end
add_events(KEYS[2], ARGV[13], ARGV[14])
if ARGV[6] == 'retry' and not is_terminal(status) then
  redis.call('ZADD', KEYS[4], tonumber(ARGV[7]), ARGV[8])
else
  redis.call('HSET', KEYS[5], ARGV[2], ARGV[9])
  if not is_terminal(status) then
    set_status(meta, ARGV[1], 'failed', tonumber(ARGV[12]))
    redis.call('HSET', meta, 'error', ARGV[10])
    bump_version(meta)
  end
end
touch(meta, ARGV[1], ARGV[11], tonumber(ARGV[12]))
return {'ok', redis.call('HGET', meta, 'status')}
