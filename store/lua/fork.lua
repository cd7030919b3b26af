-- Create a session forked from another's checkpoint: its metadata, the results,
-- checkpoints and conversations up to that point, its next steps and events, all or
-- nothing. The original is only read (by the caller), never written.
-- One key per conversation lane from `lanes_at`, in the order of `lanes` (JSON array
-- of [lane, [message JSON, ...]]); `results`: JSON array of [step, result JSON].
-- KEYS and ARGV by name, in the order of ForkKeys and ForkArgs (script_operator.py):
local meta_key = KEYS[1]
local results_key = KEYS[2]
local order_key = KEYS[3]
local events_key = KEYS[4]
local stream_key = KEYS[5]
local conversations_key = KEYS[6]
local checkpoints_key = KEYS[7]
local held_key = KEYS[8]
local timers_key = KEYS[9]
local spec_index_key = KEYS[10]
local lanes_at = 11  -- KEYS[lanes_at..]: lanes
-- index: the last six KEYS, the status indexes (_lib.lua)
local session_id = ARGV[1]
local fields = ARGV[2]
local results = ARGV[3]
local checkpoints = ARGV[4]
local lanes = ARGV[5]
local jobs = ARGV[6]
local events = ARGV[7]
local status = ARGV[8]
local now_ms = ARGV[9]
local timers = ARGV[10]
local events_max = ARGV[11]

local now = tonumber(now_ms)
if redis.call('EXISTS', meta_key) == 1 then return {'exists'} end

local function push_all(key, values)
  for i = 1, #values, 500 do
    redis.call('RPUSH', key, unpack(values, i, math.min(i + 499, #values)))
  end
end

local args = {}
for k, v in pairs(cjson.decode(fields)) do
  args[#args + 1] = k
  args[#args + 1] = tostring(v)
end
redis.call('HSET', meta_key, unpack(args))
redis.call('HSET', meta_key, 'version', 1, 'status', status)
set_status(meta_key, session_id, status, now)

local order = {}
for _, r in ipairs(cjson.decode(results)) do
  redis.call('HSET', results_key, r[1], r[2])
  order[#order + 1] = r[1]
end
if #order > 0 then push_all(order_key, order) end
local saved = cjson.decode(checkpoints)
if #saved > 0 then push_all(checkpoints_key, saved) end
for i, lane in ipairs(cjson.decode(lanes)) do
  if #lane[2] > 0 then
    push_all(KEYS[lanes_at + i - 1], lane[2])
    redis.call('SADD', conversations_key, lane[1])
  end
end

add_events(events_key, events, events_max)
for _, job in ipairs(cjson.decode(jobs)) do
  if status == 'paused' then redis.call('RPUSH', held_key, job) else enqueue(stream_key, job) end
end
for _, timer in ipairs(cjson.decode(timers)) do
  redis.call('ZADD', timers_key, timer[1], timer[2])
end
redis.call('ZADD', spec_index_key, now, session_id)
return {'created', session_id}
