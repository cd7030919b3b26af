-- Remove a consumer from a shard's group, but only when it holds no pending entry
-- (XGROUP DELCONSUMER would drop those entries from the group's PEL: lost steps).
-- KEYS: 1 stream. ARGV: 1 group, 2 consumer, 3 min idle ms (0: any).
local ok, consumers = pcall(redis.call, 'XINFO', 'CONSUMERS', KEYS[1], ARGV[1])
if not ok then return 0 end
for _, c in ipairs(consumers) do
  local info = {}
  for i = 1, #c, 2 do info[c[i]] = c[i + 1] end
  if info['name'] == ARGV[2] then
    if tonumber(info['pending']) > 0 or tonumber(info['idle']) < tonumber(ARGV[3]) then
      return 0
    end
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], ARGV[2])
    return 1
  end
end
return 0
