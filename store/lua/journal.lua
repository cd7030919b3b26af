-- Journal one model turn or tool result of a running step, and its events, behind the
-- step's lease: a worker that lost the entry to another writes nothing.
-- KEYS: 1 stream, 2 the step's journal, 3 the set of steps with a journal, 4 events
-- ARGV: 1 group, 2 consumer, 3 entry id, 4 step, 5 field (m<turn> or t<ordinal>; ''
--       for events only), 6 value, 7 events (JSON array), 8 events max
if not owns(KEYS[1], ARGV[1], ARGV[3], ARGV[2]) then return 0 end
if ARGV[5] ~= '' then
  redis.call('HSET', KEYS[2], ARGV[5], ARGV[6])
  redis.call('SADD', KEYS[3], ARGV[4])
end
add_events(KEYS[4], ARGV[7], ARGV[8])
return 1
