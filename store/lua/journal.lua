-- Journal one model turn or tool result of a running step, and its events, behind the
-- step's lease: a worker that lost the entry to another writes nothing. `field` is
-- m<turn> or t<ordinal>, '' for events only. With a wait (to > 0), the session's clock
-- leaves it out (a capacity wait its spec does not count toward max_duration_s).
-- KEYS and ARGV by name, in the order of JournalKeys and JournalArgs (script_step.py):
local stream_key = KEYS[1]
local journal_key = KEYS[2]
local journals_key = KEYS[3]
local events_key = KEYS[4]
local meta_key = KEYS[5]
local group = ARGV[1]
local consumer = ARGV[2]
local entry_id = ARGV[3]
local step = ARGV[4]
local field = ARGV[5]
local value = ARGV[6]
local events = ARGV[7]
local events_max = ARGV[8]
local wait_from_ms = ARGV[9]
local wait_to_ms = ARGV[10]

if not owns(stream_key, group, entry_id, consumer) then return 0 end
if field ~= '' then
  redis.call('HSET', journal_key, field, value)
  redis.call('SADD', journals_key, step)
end
add_events(events_key, events, events_max)
if wait_to_ms ~= '0' then
  exclude_wait(meta_key, tonumber(wait_from_ms), tonumber(wait_to_ms))
end
return 1
