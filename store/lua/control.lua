-- Operator transitions (seed 003): pause, resume, cancel. Atomic with every commit,
-- so a step finishing meanwhile either sees the old status or the new one, never half.
-- KEYS: 1 meta, 2 events, 3 stream, 4 held, 5 failed jobs, 6 the spec-hash index of the
--       spec a resume sets (`run --auto-resume` finds it there), then the six index keys.
-- ARGV: 1 sid, 2 action, 3 now iso, 4 now ms, 5 reason, 6 events (JSON array),
--       7 meta fields to set on resume (JSON object; may be '{}'), 8 events max
local meta, sid, action = KEYS[1], ARGV[1], ARGV[2]
local now_ms = tonumber(ARGV[4])
local status = redis.call('HGET', meta, 'status')
if not status then return {'gone'} end

if action == 'pause' then
  if status ~= 'running' then return {'invalid', status} end
  set_status(meta, sid, 'paused', now_ms)
  redis.call('HSET', meta, 'paused_reason', ARGV[5], 'paused_at_ms', now_ms)
elseif action == 'cancel' then
  if status ~= 'running' and status ~= 'paused' then return {'invalid', status} end
  set_status(meta, sid, 'cancelled', now_ms)
  redis.call('HSET', meta, 'error', ARGV[5])
  redis.call('DEL', KEYS[4])
elseif action == 'resume' then
  if status ~= 'paused' and status ~= 'failed' then return {'invalid', status} end
  local failed = redis.call('HVALS', KEYS[5])
  local held = redis.call('LRANGE', KEYS[4], 0, -1)
  local waiting = redis.call('HGET', meta, 'waiting')
  local has_waiting = waiting and waiting ~= '' and waiting ~= '[]'
  if #failed == 0 and #held == 0 and not has_waiting and status == 'failed' then
    return {'nothing', redis.call('HGET', meta, 'error') or ''}
  end
  local sets = cjson.decode(ARGV[7])
  for k, v in pairs(sets) do redis.call('HSET', meta, k, tostring(v)) end
  if sets['spec_hash'] then redis.call('ZADD', KEYS[6], now_ms, sid) end
  -- A record written before the spec was stored once also kept its text: with a new
  -- spec it would be stale, and nothing reads it.
  if sets['spec_json'] then redis.call('HDEL', meta, 'spec_text') end
  -- Paused time does not count against max_duration_s.
  local paused_at = tonumber(redis.call('HGET', meta, 'paused_at_ms') or '')
  if paused_at then
    redis.call('HINCRBY', meta, 'started_ms', now_ms - paused_at)
    redis.call('HDEL', meta, 'paused_at_ms')
  end
  for _, job_json in ipairs(failed) do
    local job = cjson.decode(job_json)
    job['attempt'] = 1
    enqueue(KEYS[3], cjson.encode(job))
  end
  redis.call('DEL', KEYS[5])
  for _, job_json in ipairs(held) do enqueue(KEYS[3], job_json) end
  redis.call('DEL', KEYS[4])
  redis.call('HSET', meta, 'error', '', 'paused_reason', '')
  if has_waiting and #held == 0 and #failed == 0 then
    set_status(meta, sid, 'paused', now_ms)  -- still waiting for a human
    redis.call('HSET', meta, 'paused_reason', ARGV[5])
  else
    set_status(meta, sid, 'running', now_ms)
  end
else
  return redis.error_reply('unknown action ' .. action)
end
bump_version(meta)
add_events(KEYS[2], ARGV[6], ARGV[8])
touch(meta, sid, ARGV[3], now_ms)
return {'ok', redis.call('HGET', meta, 'status')}
