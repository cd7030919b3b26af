-- Flag a running session that stopped making progress: one event per episode. Nothing
-- is written if the last event flags it already, or if the session moved (it is no
-- longer running, or its running-index score changed: a commit or control touched it)
-- since it was found.
-- KEYS: 1 meta, 2 the shard's running index, 3 events.
-- ARGV: 1 sid, 2 running-index score when found, 3 the flag's event type,
--       4 events (JSON array), 5 events max
local last = redis.call('XREVRANGE', KEYS[3], '+', '-', 'COUNT', 1)
if last[1] then
  local fields = last[1][2]
  for i = 1, #fields, 2 do
    if fields[i] == 'type' and fields[i + 1] == ARGV[3] then return 'already' end
  end
end
if redis.call('HGET', KEYS[1], 'status') ~= 'running' then return 'moved' end
local score = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not score or tonumber(score) ~= tonumber(ARGV[2]) then return 'moved' end
add_events(KEYS[3], ARGV[4], ARGV[5])
return 'flagged'
