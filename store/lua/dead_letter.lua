-- An entry was delivered too many times: park it on the dead-letter stream and fail
-- the session with a message naming the step.
-- KEYS: 1 meta, 2 events, 3 stream, 4 dead letters, 5 failed jobs, 6 results, then the
--       six index keys.
-- ARGV: 1 sid, 2 step, 3 entry id, 4 group, 5 consumer, 6 job JSON, 7 deliveries,
--       8 error, 9 now iso, 10 now ms, 11 events (JSON array), 12 events max
local meta, stream, group, entry = KEYS[1], KEYS[3], ARGV[4], ARGV[3]
if not owns(stream, group, entry, ARGV[5]) then return {'stale'} end
ack(stream, group, entry)
local status = redis.call('HGET', meta, 'status')
if not status then return {'gone'} end
if redis.call('HEXISTS', KEYS[6], ARGV[2]) == 1 then return {'duplicate'} end
redis.call('XADD', KEYS[4], '*', 'sid', ARGV[1], 'step', ARGV[2], 'entry', entry,
  'deliveries', ARGV[7], 'job', ARGV[6], 'error', ARGV[8], 'at', ARGV[9])
redis.call('HSET', KEYS[5], ARGV[2], ARGV[6])
add_events(KEYS[2], ARGV[11], ARGV[12])
if not is_terminal(status) then
  set_status(meta, ARGV[1], 'failed', tonumber(ARGV[10]))
  redis.call('HSET', meta, 'error', ARGV[8])
  bump_version(meta)
end
touch(meta, ARGV[1], ARGV[9], tonumber(ARGV[10]))
return {'ok'}
