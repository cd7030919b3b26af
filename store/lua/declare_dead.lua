-- Declare a silent consumer dead on one shard, at most once: only while its beat is the
-- one the caller saw last (a beat since, a graceful stop or another declaration changed
-- it: 'alive'). Its pending entries move at once to the holder consumer, marked idle
-- (XCLAIM JUSTID: their delivery counts are kept), so any worker's next re-claim takes
-- them; from then on the dead consumer's fence fails (_lib.lua `owns`), so if it wakes
-- up it writes nothing for them. Each affected session gets a worker_declared_dead
-- event naming the step.
-- KEYS: 1 beats, 2 deaths, 3 orphans, 4 stream, 5 the shard's unwritten key (the session
--       events are spelled here, in the shard's slot: store/keys.py)
-- ARGV: 1 consumer, 2 its beat number as seen, 3 group, 4 holder, 5 idle ms to give the
--       entries, 6 declared by, 7 silence the caller saw (ms), 8 now iso, 9 events max,
--       10 session key prefix, 11 events suffix, 12 keep declarations this long (ms),
--       13 the events' detail
-- Returns {'alive'} | {'declared', entries taken, ids...}
local beats, deaths, orphans, stream = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local consumer, group, holder = ARGV[1], ARGV[3], ARGV[4]
if redis.call('HGET', beats, consumer) ~= ARGV[2] then return {'alive'} end
redis.call('HDEL', beats, consumer)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function note_event(id)
  local found = redis.call('XRANGE', stream, id, id)[1]
  if not found then return end
  local f = {}
  for i = 1, #found[2], 2 do f[found[2][i]] = found[2][i + 1] end
  if not f['sid'] then return end
  local meta = ARGV[10] .. f['sid']
  if redis.call('EXISTS', meta) == 0 then return end
  add_event(meta .. ARGV[11], ARGV[9], 'type', 'worker_declared_dead', 'step', f['step'] or '',
    'attempt', f['attempt'] or '0', 'worker', consumer, 'at', ARGV[8], 'detail', ARGV[13])
end

local ids = {}
for _ = 1, 1000 do  -- 100 at a time, until none is left under it
  local ok, pending = pcall(redis.call, 'XPENDING', stream, group, '-', '+', 100, consumer)
  if not ok or #pending == 0 then break end
  for _, p in ipairs(pending) do
    -- An entry deleted from the stream meanwhile leaves the pending list here (Redis 7).
    if redis.call('XCLAIM', stream, group, holder, 0, p[1], 'IDLE', ARGV[5], 'JUSTID')[1] then
      note_event(p[1])
      redis.call('HSET', orphans, p[1], consumer)
      ids[#ids + 1] = p[1]
    end
  end
end
local shown = {}
for i = 1, math.min(#ids, 50) do shown[i] = ids[i] end
redis.call('HSET', deaths, consumer, cjson.encode({
  at_ms = now, by = ARGV[6], silent_ms = tonumber(ARGV[7]), entries = #ids, reruns = 0,
  ids = shown}))
-- Declarations older than the keep time go (each call looks at them all: few).
local keep = tonumber(ARGV[12])
local all = redis.call('HGETALL', deaths)
for i = 1, #all, 2 do
  local okd, record = pcall(cjson.decode, all[i + 1])
  if not okd or type(record) ~= 'table' or (tonumber(record['at_ms']) or 0) < now - keep then
    redis.call('HDEL', deaths, all[i])
  end
end
local out = {'declared', #ids}
for _, id in ipairs(ids) do out[#out + 1] = id end
return out
