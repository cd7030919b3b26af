-- Shared helpers, prepended to every script by store/script_library.py.
-- Convention: scripts that change a session's status receive the shard's index keys
-- as the LAST six KEYS: idx:all, then one zset per status (running, paused,
-- completed, failed, cancelled), so every key a script touches is declared.

local STATUSES = {'running', 'paused', 'completed', 'failed', 'cancelled'}

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
