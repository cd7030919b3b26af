-- Extend a lock only if we still hold it (compare-and-expire).
-- KEYS: 1 lock. ARGV: 1 token, 2 ttl ms
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
