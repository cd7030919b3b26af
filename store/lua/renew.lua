-- Renew the lease on a running step: reset its idle time, only while we still own it.
-- KEYS and ARGV by name, in the order of StreamKeys and RenewArgs (script_step.py):
local stream_key = KEYS[1]
local group = ARGV[1]
local consumer = ARGV[2]
local entry_id = ARGV[3]

if not owns(stream_key, group, entry_id, consumer) then return 0 end
redis.call('XCLAIM', stream_key, group, consumer, 0, entry_id, 'JUSTID')
return 1
