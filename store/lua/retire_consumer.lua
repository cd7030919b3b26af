-- Remove a consumer from a shard's group, but only when it holds no pending entry
-- (XGROUP DELCONSUMER would drop those entries from the group's PEL: lost steps).
-- `min_idle_ms` 0: any.
-- KEYS and ARGV by name, in the order of StreamKeys (script_step.py) and RetireConsumerArgs (script_operator.py):
local stream_key = KEYS[1]
local group = ARGV[1]
local consumer = ARGV[2]
local min_idle_ms = ARGV[3]

local ok, consumers = pcall(redis.call, 'XINFO', 'CONSUMERS', stream_key, group)
if not ok then return 0 end
for _, c in ipairs(consumers) do
  local info = {}
  for i = 1, #c, 2 do info[c[i]] = c[i + 1] end
  if info['name'] == consumer then
    if tonumber(info['pending']) > 0 or tonumber(info['idle']) < tonumber(min_idle_ms) then
      return 0
    end
    redis.call('XGROUP', 'DELCONSUMER', stream_key, group, consumer)
    return 1
  end
end
return 0
