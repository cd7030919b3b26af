-- Extend a lock only if we still hold it (compare-and-expire).
-- KEYS and ARGV by name, in the order of LockKeys and LockExtendArgs (script_operator.py):
local lock_key = KEYS[1]
local token = ARGV[1]
local ttl_ms = ARGV[2]

if redis.call('GET', lock_key) == token then
  return redis.call('PEXPIRE', lock_key, ttl_ms)
end
return 0
