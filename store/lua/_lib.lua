-- Shared helpers, prepended to every script by store/script_library.py.
-- Convention: scripts that change a session's status receive the shard's index keys
-- as the LAST six KEYS: idx:all, then one zset per status (running, paused,
-- completed, failed, cancelled), so every key a script touches is declared.

local STATUSES = {'running', 'paused', 'completed', 'failed', 'cancelled'}
-- Provider capacity: a limit the provider names is paced at this share of it (arrivals
-- jitter; capacity_throttled.lua and capacity_release.lua believe it alike).
local TOLD_MARGIN = 0.95

local function index_keys()
  local n = #KEYS
  local idx = {all = KEYS[n - 5]}
  for i, s in ipairs(STATUSES) do idx[s] = KEYS[n - 5 + i] end
  return idx
end

local function is_terminal(status)
  return status == 'completed' or status == 'failed' or status == 'cancelled'
end

-- The entry is pending and delivered to `consumer`: the fence every write checks.
local function owns(stream, group, entry_id, consumer)
  local p = redis.call('XPENDING', stream, group, entry_id, entry_id, 1)
  return p[1] ~= nil and p[1][2] == consumer
end

local function ack(stream, group, entry_id)
  redis.call('XACK', stream, group, entry_id)
  redis.call('XDEL', stream, entry_id)
end

-- A session's events are capped at about `maxlen` (DURABLE_EVENTS_MAX): the oldest go
-- first, in whole stream nodes (MAXLEN ~), so a session never grows without bound.
-- One event (field, value, field, value...) on a session's events, capped: every event
-- write goes through here.
local function add_event(events_key, maxlen, ...)
  redis.call('XADD', events_key, 'MAXLEN', '~', maxlen, '*', ...)
end

local function add_events(events_key, events_json, maxlen)
  if events_json == nil or events_json == '' then return end
  for _, ev in ipairs(cjson.decode(events_json)) do
    local args = {}
    for k, v in pairs(ev) do
      args[#args + 1] = k
      args[#args + 1] = tostring(v)
    end
    add_event(events_key, maxlen, unpack(args))
  end
end

local function enqueue(stream, job_json)
  local job = cjson.decode(job_json)
  return redis.call('XADD', stream, '*', 'sid', job['session_id'], 'step', job['key'],
    'attempt', tostring(job['attempt']), 'job', job_json)
end

-- Move the session to `status` in its meta hash and in the status indexes.
local function set_status(meta, sid, status, now_ms)
  local idx = index_keys()
  local old = redis.call('HGET', meta, 'status')
  if old and old ~= status then redis.call('ZREM', idx[old], sid) end
  redis.call('HSET', meta, 'status', status)
  redis.call('ZADD', idx[status], now_ms, sid)
  redis.call('ZADD', idx.all, now_ms, sid)
end

-- The same for a script that knows the session's status `old` (read once, tracked
-- since): no HGET. Returns the new status.
local function set_status_from(meta, sid, old, status, now_ms)
  local idx = index_keys()
  if old and old ~= status then redis.call('ZREM', idx[old], sid) end
  redis.call('HSET', meta, 'status', status)
  redis.call('ZADD', idx[status], now_ms, sid)
  redis.call('ZADD', idx.all, now_ms, sid)
  return status
end

-- `touch`'s index part, for a script that knows the status and sets updated_at itself.
local function touch_indexes(sid, status, now_ms)
  local idx = index_keys()
  redis.call('ZADD', idx.all, now_ms, sid)
  if status then redis.call('ZADD', idx[status], now_ms, sid) end
end

local function touch(meta, sid, now_iso, now_ms)
  local idx = index_keys()
  local status = redis.call('HGET', meta, 'status')
  redis.call('HSET', meta, 'updated_at', now_iso)
  redis.call('ZADD', idx.all, now_ms, sid)
  if status then redis.call('ZADD', idx[status], now_ms, sid) end
end

local function bump_version(meta)
  return redis.call('HINCRBY', meta, 'version', 1)
end

-- The session's clock goes on after a pause: paused time does not count against
-- max_duration_s (started_ms moves on by it), and a capacity wait that overlapped the
-- pause is not taken off again (exclude_wait starts from here at the earliest).
local function unpause_clock(meta, now)
  local paused_at = tonumber(redis.call('HGET', meta, 'paused_at_ms') or '')
  if paused_at then
    redis.call('HINCRBY', meta, 'started_ms', now - paused_at)
    redis.call('HDEL', meta, 'paused_at_ms')
    redis.call('HSET', meta, 'capacity_wait_through_ms', now)
  end
end

-- Take a capacity wait [from_ms, to_ms] off a running session's clock (its spec's
-- runtime.capacity.wait_counts_toward_duration is false): started_ms moves on by the part
-- no earlier wait or pause already took off, so parallel steps waiting at once count
-- once. A paused session's clock is stopped already.
local function exclude_wait(meta, from_ms, to_ms)
  if redis.call('HGET', meta, 'status') ~= 'running' then return end
  local through = tonumber(redis.call('HGET', meta, 'capacity_wait_through_ms') or '0')
  local from = math.max(from_ms, through)
  if to_ms > from then
    redis.call('HINCRBY', meta, 'started_ms', to_ms - from)
    redis.call('HSET', meta, 'capacity_wait_through_ms', to_ms)
    -- A plan made before the clock moved read the old one (its budget check): stale.
    bump_version(meta)
  end
end

-- Taking and gating new entries of a shard's stream in the script that reads them
-- (take.lua, and commit.lua for the worker's next step). A session's keys are spelled
-- from the entry's session id with the shard's prefix and store/keys.py's suffixes
-- (store/script_step.py TakeSpelling, nine ARGV from `at`): undeclared keys, all in the
-- shard's hash-tag slot. The fence holds by construction: the entry is pending under
-- `consumer` from the XREADGROUP in the same script.
local RESULTS_TAIL = 4  -- the newest results a take brings a worker that lacks them
local UUID = '^%x%x%x%x%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%x%x%x%x%x%x%x%x$'

local function read_spelling(at, now_iso, events_max)
  -- TakeSpelling's fields in their order (tests/unit/test_script_contracts.py checks)
  local session_prefix = ARGV[at]
  local results = ARGV[at + 1]
  local order = ARGV[at + 2]
  local events = ARGV[at + 3]
  local held = ARGV[at + 4]
  local journal_prefix = ARGV[at + 5]
  local conversation_prefix = ARGV[at + 6]
  local wanted = ARGV[at + 7]
  local page = ARGV[at + 8]
  return {prefix = session_prefix, results = results, order = order, events = events,
          held = held, journal = journal_prefix, conversation = conversation_prefix,
          wanted = cjson.decode(wanted), page = tonumber(page), now = now_iso,
          events_max = events_max}
end

-- One item {id, fields, verdict} and, for 'run', {..., values, commit-order length,
-- journal fields, lane length, the lane's newest page, the newest results}. The newest
-- results (at most RESULTS_TAIL, their JSON in commit order) only when another consumer
-- committed the session's last step (meta `last_by`): a worker's cache then lacks a few
-- results, which it would read in one more round trip. 'ungated': the job cannot be
-- read or its session is not found under the spelling; it stays pending, ours, and
-- the worker gates it with gate.lua.
local function gate_entry(stream, group, consumer, sp, id, raw)
  local job_json = nil
  for i = 1, #raw, 2 do if raw[i] == 'job' then job_json = raw[i + 1] end end
  local ok, job = pcall(cjson.decode, job_json or '')
  if not (ok and type(job) == 'table' and type(job['session_id']) == 'string'
      and string.match(job['session_id'], UUID) and type(job['key']) == 'string'
      and type(job['attempt']) == 'number') then
    return {id, raw, 'ungated'}
  end
  local sid, step = job['session_id'], job['key']
  local meta = sp.prefix .. sid
  -- One read of the meta hash: its status, who committed last, then the wanted fields.
  local read = redis.call('HMGET', meta, 'status', 'last_by', unpack(sp.wanted))
  local status, last_by = read[1], read[2]
  if not status then return {id, raw, 'ungated'} end
  if redis.call('HEXISTS', meta .. sp.results, step) == 1 then
    ack(stream, group, id)
    return {id, raw, 'committed'}
  end
  if is_terminal(status) and status ~= 'failed' then
    ack(stream, group, id)
    return {id, raw, 'terminal'}
  end
  if status == 'failed' or (status == 'paused' and job['kind'] ~= 'hitl_timeout') then
    redis.call('RPUSH', meta .. sp.held, job_json)
    ack(stream, group, id)
    return {id, raw, 'held'}
  end
  -- step_started, as the worker writes it for gate.lua (Event.to_fields).
  add_event(meta .. sp.events, sp.events_max, 'type', 'step_started', 'step', step,
    'attempt', tostring(job['attempt']), 'worker', consumer, 'at', sp.now, 'detail', '')
  local values = {}
  for i = 3, #read do values[i - 2] = read[i] or '' end
  local lane = job['lane']
  if type(lane) ~= 'string' or lane == '' then lane = job['agent'] end
  local conversation = meta .. sp.conversation .. tostring(lane)
  local order_len = redis.call('LLEN', meta .. sp.order)
  local tail = {}
  if order_len > 0 and last_by ~= consumer then
    local keys = redis.call('LRANGE', meta .. sp.order, -RESULTS_TAIL, -1)
    tail = redis.call('HMGET', meta .. sp.results, unpack(keys))
  end
  return {id, raw, 'run', values, order_len,
    redis.call('HGETALL', meta .. sp.journal .. step), redis.call('LLEN', conversation),
    redis.call('LRANGE', conversation, -sp.page, -1), tail}
end

-- Up to `count` entries nobody was handed yet, made pending under `consumer` and gated.
local function take_new(stream, group, consumer, count, sp)
  local out = {}
  if count < 1 then return out end
  local got = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', count,
    'STREAMS', stream, '>')
  if not got then return out end
  for _, entry in ipairs(got[1][2]) do
    out[#out + 1] = gate_entry(stream, group, consumer, sp, entry[1], entry[2])
  end
  return out
end
