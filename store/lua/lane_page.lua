-- A conversation lane's length and newest page, read together so they agree (a script:
-- Redis Cluster clients have no MULTI/EXEC).
-- KEYS: 1 the lane's list. ARGV: 1 page size
local page = tonumber(ARGV[1])
return {redis.call('LLEN', KEYS[1]), redis.call('LRANGE', KEYS[1], -page, -1)}
