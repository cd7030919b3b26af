-- A step's attempt failed: schedule its retry on the timer set (`mode` 'retry', due at
-- `due_ms`), or fail the session ('fail').
-- KEYS and ARGV by name, in the order of FailStepKeys and FailStepArgs (script_step.py):
local meta_key = KEYS[1]
local events_key = KEYS[2]
local stream_key = KEYS[3]
local timers_key = KEYS[4]
local failed_jobs_key = KEYS[5]
local results_key = KEYS[6]
-- index: the last six KEYS, the status indexes (_lib.lua)
local session_id = ARGV[1]
local step = ARGV[2]
local entry_id = ARGV[3]
local group = ARGV[4]
local consumer = ARGV[5]
local mode = ARGV[6]
local due_ms = ARGV[7]
local retry_job = ARGV[8]
local job = ARGV[9]
local error_text = ARGV[10]
local now_iso = ARGV[11]
local now_ms = ARGV[12]
local events = ARGV[13]
local events_max = ARGV[14]

if not owns(stream_key, group, entry_id, consumer) then return {'stale'} end
ack(stream_key, group, entry_id)
local status = redis.call('HGET', meta_key, 'status')
if not status then return {'gone'} end
if redis.call('HEXISTS', results_key, step) == 1 then return {'duplicate'} end
add_events(events_key, events, events_max)
if mode == 'retry' and not is_terminal(status) then
  redis.call('ZADD', timers_key, tonumber(due_ms), retry_job)
else
  redis.call('HSET', failed_jobs_key, step, job)
  if not is_terminal(status) then
    set_status(meta_key, session_id, 'failed', tonumber(now_ms))
    redis.call('HSET', meta_key, 'error', error_text)
    bump_version(meta_key)
  end
end
touch(meta_key, session_id, now_iso, tonumber(now_ms))
return {'ok', redis.call('HGET', meta_key, 'status')}
