-- Put failed or dead-lettered steps back on the stream (operator `requeue`): attempts
-- reset, their dead letters dropped, events recorded and a failed session running
-- again, all at once or not at all. The caller read the failed jobs it asks for; if
-- any changed since (committed, failed anew), nothing is written.
-- `steps`: JSON array of [step, failed job JSON as read, job JSON to enqueue];
-- `dead_ids`: dead-letter entry ids to drop; `resumed_events`: written if the session
-- resumes.
-- KEYS and ARGV by name, in the order of RequeueKeys and RequeueArgs (script_operator.py):
local meta_key = KEYS[1]
local events_key = KEYS[2]
local stream_key = KEYS[3]
local failed_jobs_key = KEYS[4]
local held_key = KEYS[5]
local results_key = KEYS[6]
local dead_key = KEYS[7]
-- index: the last six KEYS, the status indexes (_lib.lua)
local session_id = ARGV[1]
local steps = ARGV[2]
local dead_ids = ARGV[3]
local now_iso = ARGV[4]
local now_ms = ARGV[5]
local events = ARGV[6]
local resumed_events = ARGV[7]
local events_max = ARGV[8]

local now = tonumber(now_ms)
local status = redis.call('HGET', meta_key, 'status')
if not status then return {'gone'} end
if status == 'completed' or status == 'cancelled' then return {'invalid', status} end
local todo = cjson.decode(steps)
for _, s in ipairs(todo) do
  if redis.call('HGET', failed_jobs_key, s[1]) ~= s[2]
      or redis.call('HEXISTS', results_key, s[1]) == 1 then
    return {'changed', s[1]}
  end
end

for _, s in ipairs(todo) do
  redis.call('HDEL', failed_jobs_key, s[1])
  enqueue(stream_key, s[3])
end
for _, id in ipairs(cjson.decode(dead_ids)) do redis.call('XDEL', dead_key, id) end
add_events(events_key, events, events_max)
if status == 'failed' then
  -- Steps held back while the session was failed (a sibling's next steps) go too.
  for _, job in ipairs(redis.call('LRANGE', held_key, 0, -1)) do enqueue(stream_key, job) end
  redis.call('DEL', held_key)
  redis.call('HSET', meta_key, 'error', '')
  set_status(meta_key, session_id, 'running', now)
  add_events(events_key, resumed_events, events_max)
end
bump_version(meta_key)
touch(meta_key, session_id, now_iso, now)
return {'ok', redis.call('HGET', meta_key, 'status')}
