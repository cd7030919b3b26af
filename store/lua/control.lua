-- Operator transitions (seed 003): pause, resume, cancel. Atomic with every commit,
-- so a step finishing meanwhile either sees the old status or the new one, never half.
-- `spec_index_key`: the spec-hash index of the spec a resume sets (`run --auto-resume`
-- finds it there); `sets`: meta fields to set on resume (JSON object; may be '{}').
-- KEYS and ARGV by name, in the order of ControlKeys and ControlArgs (script_operator.py):
local meta_key = KEYS[1]
local events_key = KEYS[2]
local stream_key = KEYS[3]
local held_key = KEYS[4]
local failed_jobs_key = KEYS[5]
local spec_index_key = KEYS[6]
-- index: the last six KEYS, the status indexes (_lib.lua)
local session_id = ARGV[1]
local action = ARGV[2]
local now_iso = ARGV[3]
local now_ms = ARGV[4]
local reason = ARGV[5]
local events = ARGV[6]
local sets = ARGV[7]
local events_max = ARGV[8]

local now = tonumber(now_ms)
local status = redis.call('HGET', meta_key, 'status')
if not status then return {'gone'} end

if action == 'pause' then
  if status ~= 'running' then return {'invalid', status} end
  set_status(meta_key, session_id, 'paused', now)
  redis.call('HSET', meta_key, 'paused_reason', reason, 'paused_at_ms', now)
elseif action == 'cancel' then
  if status ~= 'running' and status ~= 'paused' then return {'invalid', status} end
  set_status(meta_key, session_id, 'cancelled', now)
  redis.call('HSET', meta_key, 'error', reason)
  redis.call('DEL', held_key)
elseif action == 'resume' then
  if status ~= 'paused' and status ~= 'failed' then return {'invalid', status} end
  local failed = redis.call('HVALS', failed_jobs_key)
  local held = redis.call('LRANGE', held_key, 0, -1)
  local waiting = redis.call('HGET', meta_key, 'waiting')
  local has_waiting = waiting and waiting ~= '' and waiting ~= '[]'
  if #failed == 0 and #held == 0 and not has_waiting and status == 'failed' then
    return {'nothing', redis.call('HGET', meta_key, 'error') or ''}
  end
  local fields = cjson.decode(sets)
  for k, v in pairs(fields) do redis.call('HSET', meta_key, k, tostring(v)) end
  if fields['spec_hash'] then redis.call('ZADD', spec_index_key, now, session_id) end
  -- A record written before the spec was stored once also kept its text: with a new
  -- spec it would be stale, and nothing reads it.
  if fields['spec_json'] then redis.call('HDEL', meta_key, 'spec_text') end
  unpause_clock(meta_key, now)
  for _, job_json in ipairs(failed) do
    local job = cjson.decode(job_json)
    job['attempt'] = 1
    enqueue(stream_key, cjson.encode(job))
  end
  redis.call('DEL', failed_jobs_key)
  for _, job_json in ipairs(held) do enqueue(stream_key, job_json) end
  redis.call('DEL', held_key)
  redis.call('HSET', meta_key, 'error', '', 'paused_reason', '')
  if has_waiting and #held == 0 and #failed == 0 then
    set_status(meta_key, session_id, 'paused', now)  -- still waiting for a human
    redis.call('HSET', meta_key, 'paused_reason', reason)
  else
    set_status(meta_key, session_id, 'running', now)
  end
else
  return redis.error_reply('unknown action ' .. action)
end
bump_version(meta_key)
add_events(events_key, events, events_max)
touch(meta_key, session_id, now_iso, now)
return {'ok', redis.call('HGET', meta_key, 'status')}
