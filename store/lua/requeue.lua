-- Put failed or dead-lettered steps back on the stream (operator `requeue`): attempts
-- reset, their dead letters dropped, events recorded and a failed session running
-- again, all at once or not at all. The caller read the failed jobs it asks for; if
-- any changed since (committed, failed anew), nothing is written.
-- KEYS: 1 meta, 2 events, 3 stream, 4 failed jobs, 5 held, 6 results, 7 dead letters,
--       then the six index keys.
-- ARGV: 1 sid, 2 steps (JSON array of [step, failed job JSON as read, job JSON to
--       enqueue]), 3 dead-letter entry ids to drop (JSON array), 4 now iso, 5 now ms,
--       6 events of the steps (JSON array), 7 events if the session resumes (JSON array),
--       8 events max
local meta, sid = KEYS[1], ARGV[1]
local now_ms = tonumber(ARGV[5])
local status = redis.call('HGET', meta, 'status')
if not status then return {'gone'} end
if status == 'completed' or status == 'cancelled' then return {'invalid', status} end
local steps = cjson.decode(ARGV[2])
for _, s in ipairs(steps) do
  if redis.call('HGET', KEYS[4], s[1]) ~= s[2] or redis.call('HEXISTS', KEYS[6], s[1]) == 1 then
    return {'changed', s[1]}
  end
end

for _, s in ipairs(steps) do
  redis.call('HDEL', KEYS[4], s[1])
  enqueue(KEYS[3], s[3])
end
for _, id in ipairs(cjson.decode(ARGV[3])) do redis.call('XDEL', KEYS[7], id) end
add_events(KEYS[2], ARGV[6], ARGV[8])
if status == 'failed' then
  -- Steps held back while the session was failed (a sibling's next steps) go too.
  for _, job in ipairs(redis.call('LRANGE', KEYS[5], 0, -1)) do enqueue(KEYS[3], job) end
  redis.call('DEL', KEYS[5])
  redis.call('HSET', meta, 'error', '')
  set_status(meta, sid, 'running', now_ms)
  add_events(KEYS[2], ARGV[7], ARGV[8])
end
bump_version(meta)
touch(meta, sid, ARGV[4], now_ms)
return {'ok', redis.call('HGET', meta, 'status')}
