-- A consumer's liveness beat on one shard, and what its beat thread watches there, in
-- one call (worker/failover.py; store/liveness.py judges). An empty consumer only looks
-- (the scheduler); `seq` is its beat number, `holder` the consumer the orphans wait
-- under.
-- Returns {every consumer's beat (flat HGETALL), our own declaration when we were
--          declared dead since our last beat ('' if not), 1 when entries of a dead
--          consumer wait under the holder for a worker to take them, else 0}
-- KEYS and ARGV by name, in the order of BeatKeys and BeatArgs (script_operator.py):
local beats_key = KEYS[1]
local deaths_key = KEYS[2]
local stream_key = KEYS[3]
local consumer = ARGV[1]
local seq = ARGV[2]
local group = ARGV[3]
local holder = ARGV[4]

local declared = ''
if consumer ~= '' then
  redis.call('HSET', beats_key, consumer, seq)
  local raw = redis.call('HGET', deaths_key, consumer)
  if raw then
    local record = cjson.decode(raw)
    if not record['revived_ms'] then
      local t = redis.call('TIME')
      record['revived_ms'] = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
      redis.call('HSET', deaths_key, consumer, cjson.encode(record))
      declared = raw
    end
  end
end
local waiting = 0
local ok, pending = pcall(redis.call, 'XPENDING', stream_key, group, '-', '+', 1, holder)
if ok and pending[1] then waiting = 1 end
return {redis.call('HGETALL', beats_key), declared, waiting}
