-- An entry that is not a step job at all: park it, raw, on the dead-letter stream and
-- drop it from the step stream, only while this consumer still owns it (a worker that
-- lost the entry parks nothing). There is no session to touch.
-- KEYS: 1 stream, 2 dead letters
-- ARGV: 1 group, 2 consumer, 3 entry id, 4 error, 5 the entry's own fields (JSON object)
local stream, group, entry = KEYS[1], ARGV[1], ARGV[3]
if not owns(stream, group, entry, ARGV[2]) then return 0 end
local parked = {}
for name, value in pairs(cjson.decode(ARGV[5])) do
  if name ~= 'entry' and name ~= 'error' then
    parked[#parked + 1] = name
    parked[#parked + 1] = value
  end
end
parked[#parked + 1] = 'entry'
parked[#parked + 1] = entry
parked[#parked + 1] = 'error'
parked[#parked + 1] = ARGV[4]
redis.call('XADD', KEYS[2], '*', unpack(parked))
ack(stream, group, entry)
return 1
