-- Commit one step: result, pattern_state, tokens, conversation, artifacts, events,
-- checkpoint, next steps and the XACK, in one atomic operation behind a fence.
-- `took_key`: what this commit took, for a retry whose first reply was lost;
-- `unwritten_key`: never written, declared so that on a half-moved slot Redis answers
-- TRYAGAIN instead of running the take below over keys it cannot see (store/keys.py).
-- `answers_human` '1': a human's answer, or its default after the timeout, which
-- resumes a session paused waiting for it. `take`: new entries to take after the
-- commit (the worker's free slots). The meaning of each is beside its field in
-- store/script_step.py (CommitKeys, CommitArgs).
-- Returns {'ok', version, status, place in commit order, taken} where taken is what
-- take.lua returns for the entries taken: a busy worker's next step comes with its
-- commit, one round trip for both. Or {'conflict', version}, {'stale', taken}, or
-- {verdict}.
-- An empty entry id commits a step no stream entry carried (a human's answer): the
-- version check is then the whole fence.
-- KEYS and ARGV by name, in the order of CommitKeys and CommitArgs (script_step.py):
local meta_key = KEYS[1]
local results_key = KEYS[2]
local order_key = KEYS[3]
local events_key = KEYS[4]
local stream_key = KEYS[5]
local conversation_key = KEYS[6]
local conversations_key = KEYS[7]
local artifacts_key = KEYS[8]
local checkpoints_key = KEYS[9]
local held_key = KEYS[10]
local timers_key = KEYS[11]
local journal_key = KEYS[12]
local journals_key = KEYS[13]
local took_key = KEYS[14]
local unwritten_key = KEYS[15]
-- index: the last six KEYS, the status indexes (_lib.lua)
local session_id = ARGV[1]
local step = ARGV[2]
local entry_id = ARGV[3]
local group = ARGV[4]
local consumer = ARGV[5]
local expected_version = ARGV[6]
local result = ARGV[7]
local state = ARGV[8]
local decided = ARGV[9]
local reason = ARGV[10]
local input_tokens = ARGV[11]
local output_tokens = ARGV[12]
local agent = ARGV[13]
local now_iso = ARGV[14]
local now_ms = ARGV[15]
local conversation_mode = ARGV[16]
local messages = ARGV[17]
local lane = ARGV[18]
local artifacts = ARGV[19]
local events_count = ARGV[20]
local checkpoint = ARGV[21]
local waiting = ARGV[22]
local timers = ARGV[23]
local events_max = ARGV[24]
local answers_human = ARGV[25]
local take = ARGV[26]
local spelling_at = 27  -- ARGV[27..36]: TakeSpelling's fields
local fair_at = 37  -- ARGV[37..40]: FairArgs's fields
local events_at = 41  -- ARGV[events_at..]: events
local next_jobs_at = events_at + tonumber(events_count)  -- ARGV[next_jobs_at..]: next_jobs

local carried = entry_id ~= ''
if carried and not owns(stream_key, group, entry_id, consumer) then
  -- Also the retry of a commit that applied but whose reply was lost (a worker rides an
  -- outage by sending the command again): hand back, gated again, what that commit
  -- took, or those entries would wait, pending under this consumer, until idle.
  local again, took = {}, redis.call('GET', took_key)
  if took then
    local sp = read_spelling(spelling_at, now_iso, events_max)
    for id in string.gmatch(took, '%S+') do
      local found = owns(stream_key, group, id, consumer)
        and redis.call('XRANGE', stream_key, id, id)
      if found and #found > 0 then
        again[#again + 1] = gate_entry(stream_key, group, consumer, sp, id, found[1][2])
      end
    end
  end
  return {'stale', again}
end
-- `status` is tracked from here on: every change below is this script's own.
local read = redis.call('HMGET', meta_key, 'status', 'version', 'steps', 'namespace')
local status, version, steps_done = read[1], read[2], tonumber(read[3]) or 0
local namespace = read[4]
if not status then
  if carried then ack(stream_key, group, entry_id) end
  return {'gone'}
end
if redis.call('HEXISTS', results_key, step) == 1 then
  if carried then ack(stream_key, group, entry_id) end
  return {'duplicate'}
end
if version ~= expected_version then return {'conflict', version} end

local now = tonumber(now_ms)
redis.call('HSET', results_key, step, result)
local position = redis.call('RPUSH', order_key, step)  -- the result's place in commit order
-- A step that used no tokens (a HITL answer, a no-op) leaves its counters as they are.
local tokens_in, tokens_out = tonumber(input_tokens), tonumber(output_tokens)
if tokens_in ~= 0 then redis.call('HINCRBY', meta_key, 'tokens_in', tokens_in) end
if tokens_out ~= 0 then redis.call('HINCRBY', meta_key, 'tokens_out', tokens_out) end
if tokens_in + tokens_out ~= 0 then
  redis.call('HINCRBY', meta_key, 'tok:' .. agent, tokens_in + tokens_out)
end
-- The journal of the step's turns served the run that commits now: drop it.
if redis.call('SREM', journals_key, step) == 1 then redis.call('DEL', journal_key) end

local lane_len = nil
if conversation_mode ~= 'none' then
  if conversation_mode == 'replace' then redis.call('DEL', conversation_key) end
  local msgs = cjson.decode(messages)
  if #msgs > 0 then lane_len = redis.call('RPUSH', conversation_key, unpack(msgs)) end
  redis.call('SADD', conversations_key, lane)
end

for name, body in pairs(artifacts == '{}' and {} or cjson.decode(artifacts)) do
  redis.call('HSET', artifacts_key, name, body)
end

-- A session already ended keeps its status and schedules nothing (a failed one holds
-- its next steps for a resume); a paused one holds its next steps until resumed.
-- Each {job JSON, what its stream entry carries beside it} (enqueue in _lib.lua), the
-- latter as the worker sent it, or nil for a job read back from Redis.
local jobs = {}
for job_at = next_jobs_at, #ARGV, 5 do  -- step, attempt, lane, kind, then the JSON
  jobs[#jobs + 1] = {ARGV[job_at + 4], {session_id, ARGV[job_at], ARGV[job_at + 1],
                                        ARGV[job_at + 2], ARGV[job_at + 3]}}
end
-- An answer to a human-in-the-loop step (given, or its default after the timeout)
-- resumes the paused session: release what was held back.
if answers_human == '1' and status == 'paused' and decided ~= 'paused' then
  for _, job in ipairs(redis.call('LRANGE', held_key, 0, -1)) do jobs[#jobs + 1] = {job} end
  redis.call('DEL', held_key)
  redis.call('HSET', meta_key, 'paused_reason', '')
  unpause_clock(meta_key, now)
  status = set_status_from(meta_key, session_id, status, 'running', now_ms)
end
if status == 'failed' then
  -- A sibling step failed the session while this one ran: hold what this one
  -- schedules, so a resume continues every branch, not only the failed one.
  for _, job in ipairs(jobs) do redis.call('RPUSH', held_key, job[1]) end
  jobs = {}
elseif is_terminal(status) then
  jobs = {}
elseif status == 'paused' then
  for _, job in ipairs(jobs) do redis.call('RPUSH', held_key, job[1]) end
  jobs = {}
  if decided == 'completed' or decided == 'failed' then
    status = set_status_from(meta_key, session_id, status, decided, now_ms)
  end
else
  if decided ~= status then
    status = set_status_from(meta_key, session_id, status, decided, now_ms)
  end
  if decided == 'paused' then
    for _, job in ipairs(jobs) do redis.call('RPUSH', held_key, job[1]) end
    jobs = {}
  end
end
if decided == 'failed' then redis.call('HSET', meta_key, 'error', reason) end
if decided == 'paused' then
  redis.call('HSET', meta_key, 'paused_reason', reason, 'paused_at_ms', now_ms)
end
for _, job in ipairs(jobs) do enqueue(stream_key, job[1], job[2]) end
-- A namespace other than `default` with steps on the stream makes the shard's takes
-- fair (_lib.lua); `default` alone writes nothing here.
if namespace and #jobs > 0 then
  local sp = read_spelling(spelling_at, now_iso, events_max)
  redis.call('ZADD', sp.fair .. ':on', now_ms, namespace)
end

-- last_by: who committed last (a take brings another worker the newest results). The
-- step count and the version as HINCRBY would leave them (read above, not changed since
-- by this script): one write of the meta hash.
local new_version = tostring((tonumber(version) or 0) + 1)
redis.call('HSET', meta_key, 'state', state, 'waiting', waiting, 'updated_at', now_iso,
  'last_by', consumer, 'steps', steps_done + 1, 'version', new_version)
if timers ~= '[]' and not is_terminal(status) then
  for _, timer in ipairs(cjson.decode(timers)) do
    redis.call('ZADD', timers_key, timer[1], timer[2])
  end
end
-- The checkpoint records its lane's length now (conversations only grow), so a fork
-- from it can cut that conversation where it stood: `checkpoint` is a JSON object.
if conversation_mode ~= 'none' then
  lane_len = lane_len or redis.call('LLEN', conversation_key)
  checkpoint = string.sub(checkpoint, 1, -2) .. ',"lane_len":' .. lane_len .. '}'
end
redis.call('RPUSH', checkpoints_key, checkpoint)
add_events_at(events_key, events_at, tonumber(events_count), events_max)
touch_indexes(session_id, status, now_ms)  -- updated_at is set with the state above
local fa = read_fair(fair_at)
if carried then
  ack(stream_key, group, entry_id)
  -- Its namespace's quota of steps in flight has this one back (_lib.lua fair_full).
  local ns = namespace or 'default'
  if fa.limits[ns] then
    local sp = read_spelling(spelling_at, now_iso, events_max)
    redis.call('SREM', sp.fair .. ':run:' .. ns, entry_id)
  end
end
-- The take never fails the commit above (written already: a script is not rolled
-- back): an error there (a key of another session mid-migration, say) takes nothing,
-- and an entry it read stays pending under this consumer, re-claimed once idle.
local taken, want = {}, tonumber(take) or 0
if want > 0 and carried then
  local took, got = pcall(function()
    return take_new(stream_key, group, consumer, want,
                    read_spelling(spelling_at, now_iso, events_max), fa, {})
  end)
  if took then taken = got end
  if #taken > 0 then  -- kept for a retry of this commit (above), as long as one can come
    local ids = {}
    for i, item in ipairs(taken) do ids[i] = item[1] end
    pcall(redis.call, 'SET', took_key, table.concat(ids, ' '), 'PX', '900000')
  end
end
return {'ok', new_version, status, position, taken}
