-- Declare a silent consumer dead on one shard, at most once: only while its beat is the
-- one the caller saw last (`seq`; a beat since, a graceful stop or another declaration
-- changed it: 'alive'). Its pending entries move at once to the holder consumer, marked
-- idle (`idle_ms`; XCLAIM JUSTID: their delivery counts are kept), so any worker's next
-- re-claim takes them; from then on the dead consumer's fence fails (_lib.lua `owns`),
-- so if it wakes up it writes nothing for them. Each affected session gets a
-- worker_declared_dead event naming the step (its events key spelled from
-- `session_prefix` and `events_suffix`, in the slot of `unwritten_key`: store/keys.py).
-- Declarations older than `keep_ms` are dropped.
-- Returns {'alive'} | {'declared', entries taken, ids...}
-- KEYS and ARGV by name, in the order of DeclareDeadKeys and DeclareDeadArgs (script_operator.py):
local beats_key = KEYS[1]
local deaths_key = KEYS[2]
local orphans_key = KEYS[3]
local stream_key = KEYS[4]
local unwritten_key = KEYS[5]
local consumer = ARGV[1]
local seq = ARGV[2]
local group = ARGV[3]
local holder = ARGV[4]
local idle_ms = ARGV[5]
local declared_by = ARGV[6]
local silent_ms = ARGV[7]
local now_iso = ARGV[8]
local events_max = ARGV[9]
local session_prefix = ARGV[10]
local events_suffix = ARGV[11]
local keep_ms = ARGV[12]
local detail = ARGV[13]

if redis.call('HGET', beats_key, consumer) ~= seq then return {'alive'} end
redis.call('HDEL', beats_key, consumer)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function note_event(id)
  local found = redis.call('XRANGE', stream_key, id, id)[1]
  if not found then return end
  local f = {}
  for i = 1, #found[2], 2 do f[found[2][i]] = found[2][i + 1] end
  if not f['sid'] then return end
  local meta = session_prefix .. f['sid']
  if redis.call('EXISTS', meta) == 0 then return end
  add_event(meta .. events_suffix, events_max, 'type', 'worker_declared_dead',
    'step', f['step'] or '', 'attempt', f['attempt'] or '0', 'worker', consumer,
    'at', now_iso, 'detail', detail)
end

local ids = {}
for _ = 1, 1000 do  -- 100 at a time, until none is left under it
  local ok, pending = pcall(redis.call, 'XPENDING', stream_key, group, '-', '+', 100,
    consumer)
  if not ok or #pending == 0 then break end
  for _, p in ipairs(pending) do
    -- An entry deleted from the stream meanwhile leaves the pending list here (Redis 7).
    if redis.call('XCLAIM', stream_key, group, holder, 0, p[1], 'IDLE', idle_ms,
        'JUSTID')[1] then
      note_event(p[1])
      redis.call('HSET', orphans_key, p[1], consumer)
      ids[#ids + 1] = p[1]
    end
  end
end
local shown = {}
for i = 1, math.min(#ids, 50) do shown[i] = ids[i] end
redis.call('HSET', deaths_key, consumer, cjson.encode({
  at_ms = now, by = declared_by, silent_ms = tonumber(silent_ms), entries = #ids,
  reruns = 0, ids = shown}))
-- Declarations older than the keep time go (each call looks at them all: few).
local keep = tonumber(keep_ms)
local all = redis.call('HGETALL', deaths_key)
for i = 1, #all, 2 do
  local okd, record = pcall(cjson.decode, all[i + 1])
  if not okd or type(record) ~= 'table' or (tonumber(record['at_ms']) or 0) < now - keep then
    redis.call('HDEL', deaths_key, all[i])
  end
end
local out = {'declared', #ids}
for _, id in ipairs(ids) do out[#out + 1] = id end
return out
