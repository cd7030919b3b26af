-- A session's committed results in commit order, positions `first` to `last` (inclusive;
-- -1: the end), in one round trip: the order list's keys and their values together (a
-- worker whose cache lacks the steps another worker committed read them in two).
-- HMGET in parts: Lua's unpack takes a few thousand values at most.
-- KEYS and ARGV by name, in the order of ResultsKeys and ResultsPageArgs (script_operator.py):
local order_key = KEYS[1]
local results_key = KEYS[2]
local first = ARGV[1]
local last = ARGV[2]

local PART = 1000
local keys = redis.call('LRANGE', order_key, tonumber(first), tonumber(last))
local out = {}
for i = 1, #keys, PART do
  local part = redis.call('HMGET', results_key, unpack(keys, i, math.min(i + PART - 1, #keys)))
  for j = 1, #part do out[#out + 1] = part[j] end
end
return out
