-- An entry was delivered too many times: park it on the dead-letter stream and fail
-- the session with a message naming the step.
-- KEYS and ARGV by name, in the order of DeadLetterKeys and DeadLetterArgs (script_step.py):
local meta_key = KEYS[1]
local events_key = KEYS[2]
local stream_key = KEYS[3]
local dead_key = KEYS[4]
local failed_jobs_key = KEYS[5]
local results_key = KEYS[6]
-- index: the last six KEYS, the status indexes (_lib.lua)
local session_id = ARGV[1]
local step = ARGV[2]
local entry_id = ARGV[3]
local group = ARGV[4]
local consumer = ARGV[5]
local job = ARGV[6]
local deliveries = ARGV[7]
local error_text = ARGV[8]
local now_iso = ARGV[9]
local now_ms = ARGV[10]
local events = ARGV[11]
local events_max = ARGV[12]

if not owns(stream_key, group, entry_id, consumer) then return {'stale'} end
ack(stream_key, group, entry_id)
local status = redis.call('HGET', meta_key, 'status')
if not status then return {'gone'} end
if redis.call('HEXISTS', results_key, step) == 1 then return {'duplicate'} end
redis.call('XADD', dead_key, '*', 'sid', session_id, 'step', step, 'entry', entry_id,
  'deliveries', deliveries, 'job', job, 'error', error_text, 'at', now_iso)
redis.call('HSET', failed_jobs_key, step, job)
add_events(events_key, events, events_max)
if not is_terminal(status) then
  set_status(meta_key, session_id, 'failed', tonumber(now_ms))
  redis.call('HSET', meta_key, 'error', error_text)
  bump_version(meta_key)
end
touch(meta_key, session_id, now_iso, tonumber(now_ms))
return {'ok'}
