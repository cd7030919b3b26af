-- A consumer's liveness beat on one shard, and what its beat thread watches there, in
-- one call (worker/failover.py; store/liveness.py judges). An empty consumer only looks
-- (the scheduler).
-- KEYS: 1 the shard's beats, 2 its deaths, 3 its stream
-- ARGV: 1 consumer ('' to look only), 2 its beat number, 3 group, 4 the orphans' holder
-- Returns {every consumer's beat (flat HGETALL), our own declaration when we were
--          declared dead since our last beat ('' if not), 1 when entries of a dead
--          consumer wait under the holder for a worker to take them, else 0}
local beats, deaths, stream = KEYS[1], KEYS[2], KEYS[3]
local consumer = ARGV[1]
local declared = ''
if consumer ~= '' then
  redis.call('HSET', beats, consumer, ARGV[2])
  local raw = redis.call('HGET', deaths, consumer)
  if raw then
    local record = cjson.decode(raw)
    if not record['revived_ms'] then
      local t = redis.call('TIME')
      record['revived_ms'] = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
      redis.call('HSET', deaths, consumer, cjson.encode(record))
      declared = raw
    end
  end
end
local waiting = 0
local ok, pending = pcall(redis.call, 'XPENDING', stream, ARGV[3], '-', '+', 1, ARGV[4])
if ok and pending[1] then waiting = 1 end
return {redis.call('HGETALL', beats), declared, waiting}
