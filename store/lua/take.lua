-- Gate entries for this consumer in one call: first the entries a blocking XREADGROUP
-- just handed it (`ids`; one call for all of them, not one gate.lua each), then up to
-- `count` new entries read and gated here (what XREADGROUP and gate.lua per entry did
-- in 1 + n round trips). An id no longer pending under this consumer is 'stale'
-- (someone took it over: the fence), one whose stream entry is gone is 'ungated' with
-- no fields. The gating itself is _lib.lua's gate_entry (commit.lua takes the same way);
-- while namespaces other than `default` are about, _lib.lua's fair take decides which
-- entries run now and which wait their namespace's turn (docs/tenants.md).
-- `unwritten_key` is never written: declared so that on a half-moved slot Redis answers
-- TRYAGAIN instead of running this over session keys it cannot see (store/keys.py).
-- Returns one item per entry, the ids' first: {id, fields, verdict} and, for 'run',
--       {..., values, commit-order length, journal fields, lane length, the lane's
--       newest page} (what the step restores its conversation from)
-- KEYS and ARGV by name, in the order of TakeKeys and TakeArgs (script_gate.py):
local stream_key = KEYS[1]
local unwritten_key = KEYS[2]
local group = ARGV[1]
local consumer = ARGV[2]
local count = ARGV[3]
local now_iso = ARGV[4]
local events_max = ARGV[5]
local ids = ARGV[6]
local spelling_at = 7  -- ARGV[7..16]: TakeSpelling's fields
local fair_at = 17  -- ARGV[17..20]: FairArgs's fields

local sp = read_spelling(spelling_at, now_iso, events_max)
local out, given = {}, {}
for id in string.gmatch(ids, '%S+') do
  if not owns(stream_key, group, id, consumer) then
    out[#out + 1] = {id, {}, 'stale'}
  else
    local found = redis.call('XRANGE', stream_key, id, id)
    if #found == 0 then
      out[#out + 1] = {id, {}, 'ungated'}
    else
      given[#given + 1] = {id, found[1][2]}
    end
  end
end
for _, item in ipairs(take_new(stream_key, group, consumer, tonumber(count), sp,
                               read_fair(fair_at), given)) do
  out[#out + 1] = item
end
return out
