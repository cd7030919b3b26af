-- An entry that is not a step job at all: park it, raw, on the dead-letter stream and
-- drop it from the step stream, only while this consumer still owns it (a worker that
-- lost the entry parks nothing). There is no session to touch. `fields`: the entry's
-- own fields (JSON object).
-- KEYS and ARGV by name, in the order of ParkEntryKeys and ParkEntryArgs (script_step.py):
local stream_key = KEYS[1]
local dead_key = KEYS[2]
local group = ARGV[1]
local consumer = ARGV[2]
local entry_id = ARGV[3]
local error_text = ARGV[4]
local fields = ARGV[5]

if not owns(stream_key, group, entry_id, consumer) then return 0 end
local parked = {}
for name, value in pairs(cjson.decode(fields)) do
  if name ~= 'entry' and name ~= 'error' then
    parked[#parked + 1] = name
    parked[#parked + 1] = value
  end
end
parked[#parked + 1] = 'entry'
parked[#parked + 1] = entry_id
parked[#parked + 1] = 'error'
parked[#parked + 1] = error_text
redis.call('XADD', dead_key, '*', unpack(parked))
ack(stream_key, group, entry_id)
return 1
