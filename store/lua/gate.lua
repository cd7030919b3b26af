-- Decide, atomically with pause/cancel/commit, what becomes of a delivered step,
-- and when it is to run, return what the worker needs to run and plan it.
-- KEYS: 1 meta, 2 stream, 3 held, 4 results, 5 order, 6 events, 7 the step's journal
-- ARGV: 1 group, 2 consumer, 3 entry id, 4 step key, 5 job JSON, 6 results already
--       known to the caller, 7 step_started event (JSON array), 8 meta fields wanted
--       (JSON array), 9 job kind (a HITL timeout must get through a paused session),
--       10 events max
local meta, stream = KEYS[1], KEYS[2]
if not owns(stream, ARGV[1], ARGV[3], ARGV[2]) then return {'stale'} end
local status = redis.call('HGET', meta, 'status')
if not status then
  ack(stream, ARGV[1], ARGV[3])
  return {'gone'}
end
if redis.call('HEXISTS', KEYS[4], ARGV[4]) == 1 then
  ack(stream, ARGV[1], ARGV[3])
  return {'committed'}
end
-- A failed session is resumable: keep its due steps (a sibling's retry, say) with the
-- held ones so that a resume runs them instead of leaving their branch stranded.
if is_terminal(status) and status ~= 'failed' then
  ack(stream, ARGV[1], ARGV[3])
  return {'terminal', status}
end
if status == 'failed' or (status == 'paused' and ARGV[9] ~= 'hitl_timeout') then
  redis.call('RPUSH', KEYS[3], ARGV[5])
  ack(stream, ARGV[1], ARGV[3])
  return {'held'}
end
add_events(KEYS[6], ARGV[7], ARGV[10])
local wanted = cjson.decode(ARGV[8])
local values = redis.call('HMGET', meta, unpack(wanted))
for i = 1, #values do if not values[i] then values[i] = '' end end
local keys = redis.call('LRANGE', KEYS[5], tonumber(ARGV[6]), -1)
local results = {}
if #keys > 0 then results = redis.call('HMGET', KEYS[4], unpack(keys)) end
-- The step's journal: the turns a run before a crash made, to replay (usually none).
return {'run', values, keys, results, redis.call('HGETALL', KEYS[7])}
