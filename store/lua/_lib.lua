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
  local p = redis.call('XPENDING', stream, group, entry_id, entry_id, '1')
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

-- The same for events sent as ARGV (store/script_step.py event_values), nothing to
-- decode: from `at`, `count` values, each event its count of fields and values, then those.
local function add_events_at(events_key, at, count, maxlen)
  local i, stop = at, at + count
  while i < stop do
    local n = tonumber(ARGV[i])
    add_event(events_key, maxlen, unpack(ARGV, i + 1, i + n))
    i = i + n + 1
  end
end

-- What a step's stream entry carries beside its job, read from the decoded job:
-- {session, step, attempt, conversation lane (its own, or its agent's), kind}.
local function gate_fields(job)
  local lane = job['lane']
  if type(lane) ~= 'string' or lane == '' then lane = job['agent'] end
  return {job['session_id'], job['key'], tostring(job['attempt']), tostring(lane),
          tostring(job['kind'] or 'agent')}
end

-- A step job onto a shard's stream. Beside the job's JSON its entry carries what a take
-- reads to gate it (gate_fields), so a take never decodes the job. `known`: those five
-- as the caller has them (commit.lua's, from the worker); without it, from the job.
local function enqueue(stream, job_json, known)
  local f = known or gate_fields(cjson.decode(job_json))
  return redis.call('XADD', stream, '*', 'sid', f[1], 'step', f[2], 'attempt', f[3],
    'lane', f[4], 'kind', f[5], 'job', job_json)
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
-- (store/script_gate.py TakeSpelling, ten ARGV from `at`): undeclared keys, all in the
-- shard's hash-tag slot. The fence holds by construction: the entry is pending under
-- `consumer` from the XREADGROUP in the same script.
local RESULTS_TAIL = '-4'  -- the newest results a take brings a worker that lacks them
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
  local fair_prefix = ARGV[at + 9]
  return {prefix = session_prefix, results = results, order = order, events = events,
          held = held, journal = journal_prefix, conversation = conversation_prefix,
          wanted = cjson.decode(wanted), page_from = '-' .. page, now = now_iso,
          events_max = events_max, fair = fair_prefix}
end

-- One item {id, fields, verdict} and, for 'run', {..., values, commit-order length,
-- journal fields, lane length, the lane's newest page, the newest results}. The newest
-- results (at most RESULTS_TAIL, their JSON in commit order) only when another consumer
-- committed the session's last step (meta `last_by`): a worker's cache then lacks a few
-- results, which it would read in one more round trip. 'ungated': the job cannot be
-- read or its session is not found under the spelling; it stays pending, ours, and
-- the worker gates it with gate.lua.
local function gate_entry(stream, group, consumer, sp, id, raw)
  local f = {}
  for i = 1, #raw, 2 do f[raw[i]] = raw[i + 1] end
  local job_json, sid, step, attempt, lane, kind = f.job, f.sid, f.step, f.attempt,
    f.lane, f.kind
  if job_json and not (lane and kind) then  -- written before entries carried them
    local ok, job = pcall(cjson.decode, job_json)
    if not (ok and type(job) == 'table' and type(job['session_id']) == 'string'
        and type(job['key']) == 'string' and type(job['attempt']) == 'number') then
      return {id, raw, 'ungated'}
    end
    sid, step, attempt, lane, kind = unpack(gate_fields(job))
  end
  if not (job_json and sid and string.match(sid, UUID) and step and tonumber(attempt)) then
    return {id, raw, 'ungated'}
  end
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
  if status == 'failed' or (status == 'paused' and kind ~= 'hitl_timeout') then
    -- Held, the job is decoded when released (enqueue): one that cannot be is the
    -- worker's to park, as an entry the take cannot gate.
    if not pcall(cjson.decode, job_json) then return {id, raw, 'ungated'} end
    redis.call('RPUSH', meta .. sp.held, job_json)
    ack(stream, group, id)
    return {id, raw, 'held'}
  end
  -- step_started, as the worker writes it for gate.lua (Event.to_fields).
  add_event(meta .. sp.events, sp.events_max, 'type', 'step_started', 'step', step,
    'attempt', attempt, 'worker', consumer, 'at', sp.now, 'detail', '')
  local values = {}
  for i = 3, #read do values[i - 2] = read[i] or '' end
  local conversation = meta .. sp.conversation .. lane
  local order_len = redis.call('LLEN', meta .. sp.order)
  local tail = {}
  if order_len > 0 and last_by ~= consumer then
    local keys = redis.call('LRANGE', meta .. sp.order, RESULTS_TAIL, '-1')
    tail = redis.call('HMGET', meta .. sp.results, unpack(keys))
  end
  return {id, raw, 'run', values, order_len,
    redis.call('HGETALL', meta .. sp.journal .. step), redis.call('LLEN', conversation),
    redis.call('LRANGE', conversation, sp.page_from, '-1'), tail}
end

-- Fair dispatch between namespaces (docs/tenants.md). A shard's state, all under
-- sp.fair (TakeSpelling.fair_prefix, in the shard's slot): the hash itself ('v' the
-- virtual time, 't:<ns>' a namespace's next start tag), ':on' (zset: namespaces other
-- than `default` seen lately -> ms), ':ready' (zset: namespaces with deferred steps),
-- ':q:<ns>' (list: a namespace's deferred jobs, oldest first) and ':waiting' (list: one
-- item a deferred step, whatever its namespace: what KEDA's list trigger counts). With neither ':on'
-- nor ':ready' the take is the plain one: a fleet of one namespace pays nothing a step
-- (its workers' timer polls, promote_timers.lua, tell them not to look).
-- Otherwise a take looks ahead at up to FAIR_SCAN new entries and runs those whose
-- namespace is due (start-time fair queueing, weighted); the others leave the stream
-- for their namespace's list in this same script (XACK + XDEL + RPUSH: never pending,
-- nothing to recover), and once the stream is read to its end, free slots are filled
-- from the lists, lowest tag first, each job put back on the stream and read at once.
local FAIR_SCAN = 128  -- new entries one take looks at, at most
local FAIR_LAG = 64  -- a namespace back from quiet trails the virtual time this much
local FAIR_WINDOW_MS = 600000  -- a namespace seen this recently keeps the shard fair
local FAIR_PRUNE = 100  -- ids of a full namespace's running set checked per take
-- A namespace with a quota of steps in flight keeps the ids of its running entries on
-- the shard in '<fair>:run:<ns>' (a set): added as a take hands one out, removed by its
-- commit; an id whose entry ended otherwise (failed, dead-lettered, gated away) is
-- dropped once the set looks full and the entry is found pending no more. A namespace
-- at its limit is not due: its steps wait on its list, never failed.

local function ns_numbers(text)
  local out = {}
  for ns, n in string.gmatch(text, '([%w%-]+)=(%d+)') do out[ns] = tonumber(n) end
  return out
end

local function read_fair(at)
  -- FairArgs' fields in their order (tests/unit/test_script_contracts.py checks)
  local now_ms = ARGV[at]
  local weights = ARGV[at + 1]
  local look = ARGV[at + 2]
  local limits = ARGV[at + 3]
  return {now = tonumber(now_ms), weights = ns_numbers(weights), look = look ~= '0',
          limits = ns_numbers(limits)}
end

-- The shard's fairness state for one take; nil: the plain take. A worker whose last
-- timer poll (promote_timers.lua) found no state does not look (`look` false).
local function fair_open(sp, fa, stream, group)
  if not fa.look then return nil end
  local on, ready = sp.fair .. ':on', sp.fair .. ':ready'
  local limited = next(fa.limits) ~= nil
  if redis.call('EXISTS', on, ready) == 0 and not limited then return nil end
  redis.call('ZREMRANGEBYSCORE', on, '-inf', fa.now - FAIR_WINDOW_MS)
  local st = {key = sp.fair, on = on, ready_key = ready, ready = {}, tags = {}, seen = {},
              weights = fa.weights, now = fa.now, limits = fa.limits, running = {},
              stream = stream, group = group,
              v = tonumber(redis.call('HGET', sp.fair, 'v') or '0')}
  for _, ns in ipairs(redis.call('ZRANGE', ready, 0, -1)) do st.ready[ns] = true end
  if next(st.ready) == nil and not limited and redis.call('EXISTS', on) == 0 then
    return nil
  end
  return st
end

-- Whether `ns` holds as many steps in flight on the shard as its quota allows.
local function fair_full(st, ns)
  local limit = st.limits[ns]
  if not limit then return false end
  local n = st.running[ns]
  if n == nil then
    local key = st.key .. ':run:' .. ns
    n = redis.call('SCARD', key)
    if n >= limit then
      for _, id in ipairs(redis.call('SRANDMEMBER', key, FAIR_PRUNE)) do
        if redis.call('XPENDING', st.stream, st.group, id, id, 1)[1] == nil then
          redis.call('SREM', key, id)
          n = n - 1
        end
      end
    end
    st.running[ns] = n
  end
  return n >= limit
end

-- A step of `ns` handed out (`id`) or, with `id` nil, planned (counted, not yet kept).
local function fair_running(st, ns, id, delta)
  if not st.limits[ns] then return end
  fair_full(st, ns)  -- the count read first
  st.running[ns] = st.running[ns] + delta
  if id then redis.call('SADD', st.key .. ':run:' .. ns, id) end
end

-- A namespace's start tag: where its last step left it, but at most FAIR_LAG behind
-- the virtual time (the credit of a namespace back from quiet is bounded).
local function fair_tag(st, ns)
  local t = st.tags[ns]
  if t == nil then
    t = tonumber(redis.call('HGET', st.key, 't:' .. ns) or '0')
    st.tags[ns] = t
  end
  return math.max(t, st.v - FAIR_LAG)
end

-- The waiting namespace that is due first, and its tag (one at its quota of steps in
-- flight is not due).
local function fair_first(st)
  local best, best_tag = nil, nil
  for ns in pairs(st.ready) do
    local t = fair_tag(st, ns)
    if fair_full(st, ns) then
      t = nil
    end
    if t ~= nil and (best_tag == nil or t < best_tag or (t == best_tag and ns < best)) then
      best, best_tag = ns, t
    end
  end
  return best, best_tag
end

-- One step of `ns` dispatched: its tag moves on by 1/weight.
local function fair_dispatched(st, ns)
  local s = fair_tag(st, ns)
  st.tags[ns] = s + 1 / (st.weights[ns] or 1)
  if s > st.v then st.v = s end
  if ns ~= 'default' then st.seen[ns] = true end
end

local function fair_close(st)
  local args = {'v', tostring(st.v)}
  for ns, t in pairs(st.tags) do
    args[#args + 1] = 't:' .. ns
    args[#args + 1] = tostring(t)
  end
  redis.call('HSET', st.key, unpack(args))
  for ns in pairs(st.seen) do redis.call('ZADD', st.on, st.now, ns) end
end

-- An entry's job and its session's namespace; nil when it is no job of a session on
-- the shard (the gate decides those, as without fairness).
local function fair_entry(sp, raw)
  local sid, job = nil, nil
  for i = 1, #raw, 2 do
    if raw[i] == 'sid' then sid = raw[i + 1] elseif raw[i] == 'job' then job = raw[i + 1] end
  end
  if not (sid and job and string.match(sid, UUID)) then return nil, nil end
  local ok, decoded = pcall(cjson.decode, job)
  if not (ok and type(decoded) == 'table' and decoded['session_id'] == sid
      and type(decoded['key']) == 'string' and type(decoded['attempt']) == 'number') then
    return nil, nil  -- enqueue could not put it back: the gate decides it
  end
  local found = redis.call('HMGET', sp.prefix .. sid, 'status', 'namespace')
  if not found[1] then return nil, nil end
  return job, found[2] or 'default'
end

-- Entries leave the stream for their namespaces' lists: `ids` pending under this
-- consumer (acked and deleted), `jobs` {ns, job} in stream order. Written before the
-- ack: a script stopped midway (out of memory) leaves a step twice, never lost.
local function fair_defer(stream, group, st, ids, jobs)
  if #ids == 0 then return end
  local names = {}
  for i, nj in ipairs(jobs) do
    redis.call('RPUSH', st.key .. ':q:' .. nj[1], nj[2])
    redis.call('ZADD', st.ready_key, 0, nj[1])
    names[i] = nj[1]
  end
  redis.call('RPUSH', st.key .. ':waiting', unpack(names))
  redis.call('XACK', stream, group, unpack(ids))
  redis.call('XDEL', stream, unpack(ids))
end

-- 'run' or 'defer' for a job of `ns` with a slot free: a namespace with deferred steps
-- defers the new ones behind them; one due after a waiting namespace waits too.
local function fair_place(st, ns)
  if st.ready[ns] or fair_full(st, ns) then return 'defer' end
  local first, first_tag = fair_first(st)
  if first ~= nil and fair_tag(st, ns) > first_tag then return 'defer' end
  return 'run'
end

-- The group's last delivered id: the entries after it were handed to nobody.
local function last_delivered(stream, group)
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', stream)) do
    local info = {}
    for i = 1, #g, 2 do info[g[i]] = g[i + 1] end
    if info['name'] == group then return info['last-delivered-id'] end
  end
  return '0-0'
end

-- A step of a deferred namespace's list back on the stream, read by this consumer
-- and gated; only when no entry waits on the stream (the read is then this one).
local function fair_refill(stream, group, consumer, sp, st, ns)
  local q = st.key .. ':q:' .. ns
  local job = redis.call('LINDEX', q, 0)
  if job then enqueue(stream, job) end  -- on the stream before it leaves the list
  redis.call('LPOP', q)
  if job then redis.call('LPOP', st.key .. ':waiting') end
  if redis.call('LLEN', q) == 0 then
    st.ready[ns] = nil
    redis.call('ZREM', st.ready_key, ns)
  end
  if not job then return nil end
  local got = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', 1,
    'STREAMS', stream, '>')
  local entry = got[1][2][1]
  return gate_entry(stream, group, consumer, sp, entry[1], entry[2])
end

local function takes_slot(item)
  return item[3] == 'run' or item[3] == 'ungated'
end

-- The fair take: `given` (ours already) and up to `count` more slots' worth.
local function fair_take(stream, group, consumer, count, sp, st, given)
  local out, slots, planned = {}, count + #given, 0
  local defer_ids, defer_jobs = {}, {}
  local function decide(raw)  -- {'run'}, {'defer', ns, job} or {'stop'} (no slot left)
    local job, ns = fair_entry(sp, raw)
    if job == nil then
      if planned >= slots then return {'stop'} end
      planned = planned + 1
      return {'run'}
    end
    if planned >= slots or fair_place(st, ns) == 'defer' then
      st.ready[ns] = true  -- this namespace's later entries queue behind this one
      return {'defer', ns, job}
    end
    planned = planned + 1
    fair_dispatched(st, ns)
    fair_running(st, ns, nil, 1)
    return {'run', ns}
  end
  local function settle(id, raw, d)
    if d[1] == 'defer' then
      defer_ids[#defer_ids + 1] = id
      defer_jobs[#defer_jobs + 1] = {d[2], d[3]}
      return
    end
    local item = gate_entry(stream, group, consumer, sp, id, raw)
    out[#out + 1] = item
    if d[2] then  -- kept in its namespace's running set, or the planned count undone
      if takes_slot(item) then fair_running(st, d[2], id, 0)
      else fair_running(st, d[2], nil, -1) end
    end
  end
  for _, e in ipairs(given) do
    local d = decide(e[2])
    settle(e[1], e[2], d[1] == 'stop' and {'run'} or d)
  end
  -- One more than it looks at: whether the stream is read to its end.
  local peeked = redis.call('XRANGE', stream, '(' .. last_delivered(stream, group), '+',
    'COUNT', FAIR_SCAN + 1)
  local plan, n, drained = {}, 0, #peeked <= FAIR_SCAN
  for i, e in ipairs(peeked) do
    if i > FAIR_SCAN then break end
    local d = decide(e[2])
    if d[1] == 'stop' then drained = false; break end
    plan[e[1]] = d
    n = n + 1
  end
  if n > 0 then
    -- The same entries in the same order: nothing ran since the XRANGE.
    local got = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', n,
      'STREAMS', stream, '>')
    for _, entry in ipairs(got and got[1][2] or {}) do
      settle(entry[1], entry[2], plan[entry[1]] or {'run'})
    end
  end
  fair_defer(stream, group, st, defer_ids, defer_jobs)
  local used = 0
  for _, item in ipairs(out) do if takes_slot(item) then used = used + 1 end end
  local budget = FAIR_SCAN
  while drained and used < slots and budget > 0 do
    local ns = fair_first(st)
    if ns == nil then break end
    budget = budget - 1
    local item = fair_refill(stream, group, consumer, sp, st, ns)
    if item then
      out[#out + 1] = item
      if takes_slot(item) then
        used = used + 1
        fair_dispatched(st, ns)
        fair_running(st, ns, item[1], 1)
      end
    end
  end
  fair_close(st)
  return out
end

-- Entries a blocking read handed `consumer` already (`given`: {id, fields}), then up to
-- `count` entries nobody was handed yet, made pending under `consumer` and gated; the
-- fair take (below) instead while namespaces other than `default` are about.
local function take_new(stream, group, consumer, count, sp, fa, given)
  local st = fair_open(sp, fa, stream, group)
  if st then return fair_take(stream, group, consumer, count, sp, st, given) end
  local out = {}
  for _, e in ipairs(given) do
    out[#out + 1] = gate_entry(stream, group, consumer, sp, e[1], e[2])
  end
  if count < 1 then return out end
  local got = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', count,
    'STREAMS', stream, '>')
  if not got then return out end
  for _, entry in ipairs(got[1][2]) do
    out[#out + 1] = gate_entry(stream, group, consumer, sp, entry[1], entry[2])
  end
  return out
end
