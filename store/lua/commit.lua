-- Commit one step: result, pattern_state, tokens, conversation, artifacts, events,
-- checkpoint, next steps and the XACK, in one atomic operation behind a fence.
-- KEYS: 1 meta, 2 results, 3 order, 4 events, 5 stream, 6 conversation, 7 conversation
--       set, 8 artifacts, 9 checkpoints, 10 held, 11 timers, 12 the step's journal,
--       13 the set of steps with a journal, 14 what this commit took (the entry's
--       `took` key), 15 the shard's unwritten key (never written: declared so that on
--       a half-moved slot Redis answers TRYAGAIN instead of running the take below over
--       keys it cannot see; store/keys.py), then the six index keys.
-- ARGV: 1 sid, 2 step, 3 entry id, 4 group, 5 consumer, 6 expected version,
--       7 result JSON, 8 new state JSON, 9 decided status, 10 error or pause reason,
--       11 input tokens, 12 output tokens, 13 agent, 14 now iso, 15 now ms,
--       16 conversation mode (none|append|replace), 17 messages (JSON array of JSON
--       strings), 18 lane, 19 next jobs (JSON array of job JSON strings),
--       20 artifacts (JSON object), 21 events (JSON array), 22 checkpoint JSON,
--       23 steps waiting for a human (JSON array), 24 timers (JSON array of [due ms, job]),
--       25 events max, 26 answers a human ('1': a human's answer, or its default after
--       the timeout, which resumes a session paused waiting for it; else '0'),
--       27 new entries to take after the commit (0 or more: the worker's free slots),
--       28-36 the spelling of the shard's session keys (store/script_step.py TakeSpelling)
-- Returns {'ok', version, status, place in commit order, taken} where taken is what
-- take.lua returns for the entries taken: a busy worker's next step comes with its
-- commit, one round trip for both. Or {'conflict', version}, {'stale', taken}, or
-- {verdict}.
-- An empty entry id commits a step no stream entry carried (a human's answer): the
-- version check is then the whole fence.
local meta, stream, group, entry, consumer = KEYS[1], KEYS[5], ARGV[4], ARGV[3], ARGV[5]
local sid, step = ARGV[1], ARGV[2]
local carried = entry ~= ''
if carried and not owns(stream, group, entry, consumer) then
  -- Also the retry of a commit that applied but whose reply was lost (a worker rides an
  -- outage by sending the command again): hand back, gated again, what that commit
  -- took, or those entries would wait, pending under this consumer, until idle.
  local again, took = {}, redis.call('GET', KEYS[14])
  if took then
    local sp = spelling_at(28, ARGV[14], ARGV[25])
    for id in string.gmatch(took, '%S+') do
      local found = owns(stream, group, id, consumer) and redis.call('XRANGE', stream, id, id)
      if found and #found > 0 then
        again[#again + 1] = gate_entry(stream, group, consumer, sp, id, found[1][2])
      end
    end
  end
  return {'stale', again}
end
-- `status` is tracked from here on: every change below is this script's own.
local read = redis.call('HMGET', meta, 'status', 'version')
local status, version = read[1], read[2]
if not status then
  if carried then ack(stream, group, entry) end
  return {'gone'}
end
if redis.call('HEXISTS', KEYS[2], step) == 1 then
  if carried then ack(stream, group, entry) end
  return {'duplicate'}
end
if version ~= ARGV[6] then return {'conflict', version} end

redis.call('HSET', KEYS[2], step, ARGV[7])
local position = redis.call('RPUSH', KEYS[3], step)  -- the result's place in commit order
-- A step that used no tokens (a HITL answer, a no-op) leaves its counters as they are.
local tokens_in, tokens_out = tonumber(ARGV[11]), tonumber(ARGV[12])
if tokens_in ~= 0 then redis.call('HINCRBY', meta, 'tokens_in', tokens_in) end
if tokens_out ~= 0 then redis.call('HINCRBY', meta, 'tokens_out', tokens_out) end
if tokens_in + tokens_out ~= 0 then
  redis.call('HINCRBY', meta, 'tok:' .. ARGV[13], tokens_in + tokens_out)
end
redis.call('HINCRBY', meta, 'steps', 1)
-- The journal of the step's turns served the run that commits now: drop it.
if redis.call('SREM', KEYS[13], step) == 1 then redis.call('DEL', KEYS[12]) end

local mode = ARGV[16]
local lane_len = nil
if mode ~= 'none' then
  if mode == 'replace' then redis.call('DEL', KEYS[6]) end
  local msgs = cjson.decode(ARGV[17])
  if #msgs > 0 then lane_len = redis.call('RPUSH', KEYS[6], unpack(msgs)) end
  redis.call('SADD', KEYS[7], ARGV[18])
end

local arts = cjson.decode(ARGV[20])
for name, body in pairs(arts) do redis.call('HSET', KEYS[8], name, body) end

-- A session already ended keeps its status and schedules nothing (a failed one holds
-- its next steps for a resume); a paused one holds its next steps until resumed.
local decided = ARGV[9]
local jobs = cjson.decode(ARGV[19])
-- An answer to a human-in-the-loop step (given, or its default after the timeout)
-- resumes the paused session: release what was held back.
if ARGV[26] == '1' and status == 'paused' and decided ~= 'paused' then
  for _, job in ipairs(redis.call('LRANGE', KEYS[10], 0, -1)) do jobs[#jobs + 1] = job end
  redis.call('DEL', KEYS[10])
  redis.call('HSET', meta, 'paused_reason', '')
  local paused_at = tonumber(redis.call('HGET', meta, 'paused_at_ms') or '')
  if paused_at then
    redis.call('HINCRBY', meta, 'started_ms', tonumber(ARGV[15]) - paused_at)
    redis.call('HDEL', meta, 'paused_at_ms')
  end
  status = set_status_from(meta, sid, status, 'running', tonumber(ARGV[15]))
end
if status == 'failed' then
  -- A sibling step failed the session while this one ran: hold what this one
  -- schedules, so a resume continues every branch, not only the failed one.
  for _, job in ipairs(jobs) do redis.call('RPUSH', KEYS[10], job) end
  jobs = {}
elseif is_terminal(status) then
  jobs = {}
elseif status == 'paused' then
  for _, job in ipairs(jobs) do redis.call('RPUSH', KEYS[10], job) end
  jobs = {}
  if decided == 'completed' or decided == 'failed' then
    status = set_status_from(meta, sid, status, decided, tonumber(ARGV[15]))
  end
else
  if decided ~= status then
    status = set_status_from(meta, sid, status, decided, tonumber(ARGV[15]))
  end
  if decided == 'paused' then
    for _, job in ipairs(jobs) do redis.call('RPUSH', KEYS[10], job) end
    jobs = {}
  end
end
if decided == 'failed' then redis.call('HSET', meta, 'error', ARGV[10]) end
if decided == 'paused' then
  redis.call('HSET', meta, 'paused_reason', ARGV[10], 'paused_at_ms', tonumber(ARGV[15]))
end
for _, job in ipairs(jobs) do enqueue(stream, job) end

redis.call('HSET', meta, 'state', ARGV[8], 'waiting', ARGV[23], 'updated_at', ARGV[14])
if not is_terminal(status) then
  for _, timer in ipairs(cjson.decode(ARGV[24])) do
    redis.call('ZADD', KEYS[11], timer[1], timer[2])
  end
end
local new_version = bump_version(meta)
-- The checkpoint records its lane's length now (conversations only grow), so a fork
-- from it can cut that conversation where it stood: ARGV[22] is a JSON object.
local checkpoint = ARGV[22]
if mode ~= 'none' then
  lane_len = lane_len or redis.call('LLEN', KEYS[6])
  checkpoint = string.sub(checkpoint, 1, -2) .. ',"lane_len":' .. lane_len .. '}'
end
redis.call('RPUSH', KEYS[9], checkpoint)
add_events(KEYS[4], ARGV[21], ARGV[25])
touch_indexes(sid, status, tonumber(ARGV[15]))  -- updated_at is set with the state above
if carried then ack(stream, group, entry) end
-- The take never fails the commit above (written already: a script is not rolled
-- back): an error there (a key of another session mid-migration, say) takes nothing,
-- and an entry it read stays pending under this consumer, re-claimed once idle.
local taken, want = {}, tonumber(ARGV[27]) or 0
if want > 0 and carried then
  local took, got = pcall(function()
    return take_new(stream, group, consumer, want, spelling_at(28, ARGV[14], ARGV[25]))
  end)
  if took then taken = got end
  if #taken > 0 then  -- kept for a retry of this commit (above), as long as one can come
    local ids = {}
    for i, item in ipairs(taken) do ids[i] = item[1] end
    pcall(redis.call, 'SET', KEYS[14], table.concat(ids, ' '), 'PX', 900000)
  end
end
return {'ok', tostring(new_version), status, position, taken}
