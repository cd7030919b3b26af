-- Give entries back on shutdown: mark the ones we still own as long idle, so the next
-- XAUTOCLAIM by any worker takes them over at once instead of after claim_idle_ms.
-- KEYS: 1 stream. ARGV: 1 group, 2 consumer, 3 idle ms to set, 4.. entry ids
local released = 0
for i = 4, #ARGV do
  if owns(KEYS[1], ARGV[1], ARGV[i], ARGV[2]) then
    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'IDLE', ARGV[3], 'JUSTID')
    released = released + 1
  end
end
return released
