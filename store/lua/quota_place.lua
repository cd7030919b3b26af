-- Take a place in a namespace's quota (sessions/quotas.py): added only while the set
-- holds fewer than `limit` members; a member already there keeps its place.
-- KEYS and ARGV by name, in the order of QuotaPlaceKeys and QuotaPlaceArgs (script_access.py):
local places_key = KEYS[1]
local member = ARGV[1]
local limit = ARGV[2]
local now_ms = ARGV[3]

if redis.call('ZSCORE', places_key, member) then return 1 end
if redis.call('ZCARD', places_key) >= tonumber(limit) then return 0 end
redis.call('ZADD', places_key, tonumber(now_ms), member)
return 1
