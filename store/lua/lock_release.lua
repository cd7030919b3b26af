-- Release a lock only if we still hold it (compare-and-delete).
-- KEYS and ARGV by name, in the order of LockKeys and LockReleaseArgs (script_operator.py):
local lock_key = KEYS[1]
local token = ARGV[1]

if redis.call('GET', lock_key) == token then return redis.call('DEL', lock_key) end
return 0
