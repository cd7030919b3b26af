-- Give entries back on shutdown: mark the ones we still own as long idle (`idle_ms`), so
-- the next XAUTOCLAIM by any worker takes them over at once instead of after
-- claim_idle_ms.
-- KEYS and ARGV by name, in the order of StreamKeys and ReleaseArgs (script_step.py):
local stream_key = KEYS[1]
local group = ARGV[1]
local consumer = ARGV[2]
local idle_ms = ARGV[3]
local entry_ids_at = 4  -- ARGV[entry_ids_at..]: entry_ids

local released = 0
for i = entry_ids_at, #ARGV do
  local entry_id = ARGV[i]
  if owns(stream_key, group, entry_id, consumer) then
    redis.call('XCLAIM', stream_key, group, consumer, 0, entry_id, 'IDLE', idle_ms, 'JUSTID')
    released = released + 1
  end
end
return released
