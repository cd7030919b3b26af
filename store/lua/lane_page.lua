-- A conversation lane's length and newest page, read together so they agree (a script:
-- Redis Cluster clients have no MULTI/EXEC).
-- KEYS and ARGV by name, in the order of LaneKeys and LanePageArgs (script_operator.py):
local lane_key = KEYS[1]
local page = ARGV[1]

local size = tonumber(page)
return {redis.call('LLEN', lane_key), redis.call('LRANGE', lane_key, -size, -1)}
