-- Create a session and enqueue its first steps, all or nothing.
-- KEYS: 1 meta, 2 idempotency key (or a dummy in the same slot), 3 events, 4 stream,
--       5 held, 6 timers, 7 the spec-hash index (`run --auto-resume` finds the
--       latest session of a spec there), then the six status index keys (last: _lib).
-- ARGV: 1 sid, 2 meta fields (JSON object), 3 jobs (JSON array of job JSON strings),
--       4 events (JSON array), 5 idempotency key ('' for none), 6 now_ms, 7 status,
--       8 timers (JSON array of [due ms, job JSON]), 9 the request's digest,
--       10 events max (DURABLE_EVENTS_MAX)
-- An idempotency key holds "<sid> <request digest>" (a bare sid, written before digests
-- were kept, matches any request): the same key with another request is a 'conflict'.
local sid = ARGV[1]
if ARGV[5] ~= '' then
  local existing = redis.call('GET', KEYS[2])
  if existing then
    local found, digest = string.match(existing, '^(%S+) ?(%S*)$')
    if digest ~= '' and digest ~= ARGV[9] then return {'conflict', found} end
    return {'exists', found}
  end
end
if redis.call('EXISTS', KEYS[1]) == 1 then return {'exists', sid} end
local fields = cjson.decode(ARGV[2])
local args = {}
for k, v in pairs(fields) do
  args[#args + 1] = k
  args[#args + 1] = tostring(v)
end
redis.call('HSET', KEYS[1], unpack(args))
redis.call('HSET', KEYS[1], 'version', 1, 'status', ARGV[7])
set_status(KEYS[1], sid, ARGV[7], tonumber(ARGV[6]))
if ARGV[5] ~= '' then redis.call('SET', KEYS[2], sid .. ' ' .. ARGV[9]) end
add_events(KEYS[3], ARGV[4], ARGV[10])
for _, job in ipairs(cjson.decode(ARGV[3])) do
  if ARGV[7] == 'paused' then redis.call('RPUSH', KEYS[5], job) else enqueue(KEYS[4], job) end
end
for _, timer in ipairs(cjson.decode(ARGV[8])) do
  redis.call('ZADD', KEYS[6], timer[1], timer[2])
end
redis.call('ZADD', KEYS[7], tonumber(ARGV[6]), sid)
return {'created', sid}
