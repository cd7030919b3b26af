-- Decide, atomically with pause/cancel/commit, what becomes of a delivered step,
-- and when it is to run, return what the worker needs to run and plan it.
-- `known_results`: results the caller has already; `started`: the step_started event
-- (JSON array); `wanted`: meta fields to return (JSON array); `kind`: the job's kind
-- (a HITL timeout must get through a paused session).
-- KEYS and ARGV by name, in the order of GateKeys and GateArgs (script_gate.py):
local meta_key = KEYS[1]
local stream_key = KEYS[2]
local held_key = KEYS[3]
local results_key = KEYS[4]
local order_key = KEYS[5]
local events_key = KEYS[6]
local journal_key = KEYS[7]
local group = ARGV[1]
local consumer = ARGV[2]
local entry_id = ARGV[3]
local step = ARGV[4]
local job = ARGV[5]
local known_results = ARGV[6]
local started = ARGV[7]
local wanted = ARGV[8]
local kind = ARGV[9]
local events_max = ARGV[10]

if not owns(stream_key, group, entry_id, consumer) then return {'stale'} end
local status = redis.call('HGET', meta_key, 'status')
if not status then
  ack(stream_key, group, entry_id)
  return {'gone'}
end
if redis.call('HEXISTS', results_key, step) == 1 then
  ack(stream_key, group, entry_id)
  return {'committed'}
end
-- A failed session is resumable: keep its due steps (a sibling's retry, say) with the
-- held ones so that a resume runs them instead of leaving their branch stranded.
if is_terminal(status) and status ~= 'failed' then
  ack(stream_key, group, entry_id)
  return {'terminal', status}
end
if status == 'failed' or (status == 'paused' and kind ~= 'hitl_timeout') then
  redis.call('RPUSH', held_key, job)
  ack(stream_key, group, entry_id)
  return {'held'}
end
add_events(events_key, started, events_max)
local values = redis.call('HMGET', meta_key, unpack(cjson.decode(wanted)))
for i = 1, #values do if not values[i] then values[i] = '' end end
local steps = redis.call('LRANGE', order_key, tonumber(known_results), -1)
local results = {}
if #steps > 0 then results = redis.call('HMGET', results_key, unpack(steps)) end
-- The step's journal: the turns a run before a crash made, to replay (usually none).
return {'run', values, steps, results, redis.call('HGETALL', journal_key)}
