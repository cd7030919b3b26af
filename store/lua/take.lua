-- Gate entries for this consumer in one call: first the entries a blocking XREADGROUP
-- just handed it (ARGV 6, ids; one call for all of them, not one gate.lua each), then
-- up to COUNT new entries read and gated here (what XREADGROUP and gate.lua per entry
-- did in 1 + n round trips). An id no longer pending under this consumer is 'stale'
-- (someone took it over: the fence), one whose stream entry is gone is 'ungated' with
-- no fields. The gating itself is _lib.lua's gate_entry (commit.lua takes the same way).
-- KEYS: 1 the shard's stream, 2 the shard's unwritten key (never written: declared so
--       that on a half-moved slot Redis answers TRYAGAIN instead of running this
--       over session keys it cannot see; store/keys.py)
-- ARGV: 1 group, 2 consumer, 3 count of new entries, 4 now iso, 5 events max,
--       6 entry ids read already (space-separated, '' for none), 7-15 the spelling of
--       the shard's session keys (store/script_step.py TakeSpelling)
-- Returns one item per entry, the ids' first: {id, fields, verdict} and, for 'run',
--       {..., values, commit-order length, journal fields, lane length, the lane's
--       newest page} (what the step restores its conversation from)
local stream, group, consumer = KEYS[1], ARGV[1], ARGV[2]
local sp = spelling_at(7, ARGV[4], ARGV[5])
local out = {}
for id in string.gmatch(ARGV[6], '%S+') do
  if not owns(stream, group, id, consumer) then
    out[#out + 1] = {id, {}, 'stale'}
  else
    local found = redis.call('XRANGE', stream, id, id)
    if #found == 0 then
      out[#out + 1] = {id, {}, 'ungated'}
    else
      out[#out + 1] = gate_entry(stream, group, consumer, sp, id, found[1][2])
    end
  end
end
for _, item in ipairs(take_new(stream, group, consumer, tonumber(ARGV[3]), sp)) do
  out[#out + 1] = item
end
return out
