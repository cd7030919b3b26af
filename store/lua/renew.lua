-- Renew the lease on a running step: reset its idle time, only while we still own it.
-- KEYS: 1 stream. ARGV: 1 group, 2 consumer, 3 entry id
if not owns(KEYS[1], ARGV[1], ARGV[3], ARGV[2]) then return 0 end
redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[3], 'JUSTID')
return 1
