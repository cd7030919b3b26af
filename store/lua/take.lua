-- Take up to COUNT new entries for this consumer and gate each, in one call: what
-- XREADGROUP and then gate.lua per entry did in 1 + n round trips. The fence holds by
-- construction (this script made each entry pending under this consumer, atomically
-- with its gate). The session's keys are spelled from the entry's session id with the
-- prefix and suffixes store/keys.py gives (ARGV 4-9); an entry whose job cannot be read,
-- or whose session is not found under them, is returned 'ungated' (still pending, ours)
-- and the worker gates it with gate.lua as before.
-- KEYS: 1 the shard's stream
-- ARGV: 1 group, 2 consumer, 3 count, 4 session key prefix, 5 results suffix,
--       6 order suffix, 7 events suffix, 8 held suffix, 9 journal prefix suffix,
--       10 meta fields wanted (JSON array), 11 now iso, 12 events max,
--       13 conversation prefix suffix, 14 conversation page (items)
-- Returns one item per entry: {id, fields, verdict} and, for 'run',
--       {..., values, commit-order length, journal fields, lane length, the lane's
--       newest page} (what the step restores its conversation from: one round trip less)
local stream, group, consumer = KEYS[1], ARGV[1], ARGV[2]
local got = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', tonumber(ARGV[3]),
  'STREAMS', stream, '>')
if not got then return {} end
local wanted = cjson.decode(ARGV[10])
local UUID = '^%x%x%x%x%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%x%x%x%x%x%x%x%x$'

local function gate_one(id, raw, job_json, job)
  local sid, step = job['session_id'], job['key']
  local meta = ARGV[4] .. sid
  local status = redis.call('HGET', meta, 'status')
  if not status then return {id, raw, 'ungated'} end
  if redis.call('HEXISTS', meta .. ARGV[5], step) == 1 then
    ack(stream, group, id)
    return {id, raw, 'committed'}
  end
  if is_terminal(status) and status ~= 'failed' then
    ack(stream, group, id)
    return {id, raw, 'terminal'}
  end
  if status == 'failed' or (status == 'paused' and job['kind'] ~= 'hitl_timeout') then
    redis.call('RPUSH', meta .. ARGV[8], job_json)
    ack(stream, group, id)
    return {id, raw, 'held'}
  end
  -- step_started, as the worker writes it for gate.lua (Event.to_fields).
  add_event(meta .. ARGV[7], ARGV[12], 'type', 'step_started', 'step', step,
    'attempt', tostring(job['attempt']), 'worker', consumer, 'at', ARGV[11], 'detail', '')
  local values = redis.call('HMGET', meta, unpack(wanted))
  for i = 1, #values do if not values[i] then values[i] = '' end end
  local lane = job['lane']
  if type(lane) ~= 'string' or lane == '' then lane = job['agent'] end
  local conversation = meta .. ARGV[13] .. tostring(lane)
  return {id, raw, 'run', values, redis.call('LLEN', meta .. ARGV[6]),
    redis.call('HGETALL', meta .. ARGV[9] .. step), redis.call('LLEN', conversation),
    redis.call('LRANGE', conversation, -tonumber(ARGV[14]), -1)}
end

local out = {}
for _, entry in ipairs(got[1][2]) do
  local id, raw = entry[1], entry[2]
  local job_json = nil
  for i = 1, #raw, 2 do if raw[i] == 'job' then job_json = raw[i + 1] end end
  local ok, job = pcall(cjson.decode, job_json or '')
  if ok and type(job) == 'table' and type(job['session_id']) == 'string'
      and string.match(job['session_id'], UUID) and type(job['key']) == 'string'
      and type(job['attempt']) == 'number' then
    out[#out + 1] = gate_one(id, raw, job_json, job)
  else
    out[#out + 1] = {id, raw, 'ungated'}
  end
end
return out
