-- Create a session and enqueue its first steps, all or nothing.
-- `idempotency_key` is the idempotency key's record (or a dummy in the same slot),
-- `idempotency` the key itself ('' for none); `spec_index_key`: the spec-hash index
-- (`run --auto-resume` finds the latest session of a spec there).
-- An idempotency key holds "<sid> <request digest>" (a bare sid, written before digests
-- were kept, matches any request): the same key with another request is a 'conflict'.
-- KEYS and ARGV by name, in the order of CreateKeys and CreateArgs (script_step.py):
local meta_key = KEYS[1]
local idempotency_key = KEYS[2]
local events_key = KEYS[3]
local stream_key = KEYS[4]
local held_key = KEYS[5]
local timers_key = KEYS[6]
local spec_index_key = KEYS[7]
local fair_on_key = KEYS[8]
-- index: the last six KEYS, the status indexes (_lib.lua)
local session_id = ARGV[1]
local fields = ARGV[2]
local jobs = ARGV[3]
local events = ARGV[4]
local idempotency = ARGV[5]
local now_ms = ARGV[6]
local status = ARGV[7]
local timers = ARGV[8]
local request_digest = ARGV[9]
local events_max = ARGV[10]

if idempotency ~= '' then
  local existing = redis.call('GET', idempotency_key)
  if existing then
    local found, digest = string.match(existing, '^(%S+) ?(%S*)$')
    if digest ~= '' and digest ~= request_digest then return {'conflict', found} end
    return {'exists', found}
  end
end
if redis.call('EXISTS', meta_key) == 1 then return {'exists', session_id} end
local args, meta = {}, cjson.decode(fields)
for k, v in pairs(meta) do
  args[#args + 1] = k
  args[#args + 1] = tostring(v)
end
redis.call('HSET', meta_key, unpack(args))
-- A namespace other than `default` makes the shard's takes fair (_lib.lua).
if meta['namespace'] then redis.call('ZADD', fair_on_key, tonumber(now_ms), meta['namespace']) end
redis.call('HSET', meta_key, 'version', 1, 'status', status)
set_status(meta_key, session_id, status, tonumber(now_ms))
if idempotency ~= '' then
  redis.call('SET', idempotency_key, session_id .. ' ' .. request_digest)
end
add_events(events_key, events, events_max)
for _, job in ipairs(cjson.decode(jobs)) do
  if status == 'paused' then redis.call('RPUSH', held_key, job) else enqueue(stream_key, job) end
end
for _, timer in ipairs(cjson.decode(timers)) do
  redis.call('ZADD', timers_key, timer[1], timer[2])
end
redis.call('ZADD', spec_index_key, tonumber(now_ms), session_id)
return {'created', session_id}
