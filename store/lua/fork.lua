-- Create a session forked from another's checkpoint: its metadata, the results,
-- checkpoints and conversations up to that point, its next steps and events, all or
-- nothing. The original is only read (by the caller), never written.
-- KEYS: 1 meta, 2 results, 3 order, 4 events, 5 stream, 6 conversation set,
--       7 checkpoints, 8 held, 9 timers, 10 spec index, then one key per conversation
--       lane (ARGV[5] in the same order), then the six index keys.
-- ARGV: 1 sid, 2 meta fields (JSON object), 3 results (JSON array of [step, result
--       JSON]), 4 checkpoints (JSON array of JSON strings), 5 lanes (JSON array of
--       [lane, [message JSON, ...]]), 6 jobs (JSON array of job JSON strings),
--       7 events (JSON array), 8 status, 9 now ms, 10 timers (JSON array of [due ms, job]),
--       11 events max
local sid, status, now_ms = ARGV[1], ARGV[8], tonumber(ARGV[9])
if redis.call('EXISTS', KEYS[1]) == 1 then return {'exists'} end

local function push_all(key, values)
  for i = 1, #values, 500 do
    redis.call('RPUSH', key, unpack(values, i, math.min(i + 499, #values)))
  end
end

local args = {}
for k, v in pairs(cjson.decode(ARGV[2])) do
  args[#args + 1] = k
  args[#args + 1] = tostring(v)
end
redis.call('HSET', KEYS[1], unpack(args))
redis.call('HSET', KEYS[1], 'version', 1, 'status', status)
set_status(KEYS[1], sid, status, now_ms)

local order = {}
for _, r in ipairs(cjson.decode(ARGV[3])) do
  redis.call('HSET', KEYS[2], r[1], r[2])
  order[#order + 1] = r[1]
end
if #order > 0 then push_all(KEYS[3], order) end
local checkpoints = cjson.decode(ARGV[4])
if #checkpoints > 0 then push_all(KEYS[7], checkpoints) end
for i, lane in ipairs(cjson.decode(ARGV[5])) do
  if #lane[2] > 0 then
    push_all(KEYS[10 + i], lane[2])
    redis.call('SADD', KEYS[6], lane[1])
  end
end

add_events(KEYS[4], ARGV[7], ARGV[11])
for _, job in ipairs(cjson.decode(ARGV[6])) do
  if status == 'paused' then redis.call('RPUSH', KEYS[8], job) else enqueue(KEYS[5], job) end
end
for _, timer in ipairs(cjson.decode(ARGV[10])) do
  redis.call('ZADD', KEYS[9], timer[1], timer[2])
end
redis.call('ZADD', KEYS[10], now_ms, sid)
return {'created', sid}
