-- Flag a running session that stopped making progress: one event per episode. Nothing
-- is written if the last event flags it already (`event_type`), or if the session moved
-- (it is no longer running, or its running-index score changed from `score`: a commit
-- or control touched it) since it was found.
-- KEYS and ARGV by name, in the order of FlagStuckKeys and FlagStuckArgs (script_operator.py):
local meta_key = KEYS[1]
local running_index_key = KEYS[2]
local events_key = KEYS[3]
local session_id = ARGV[1]
local score = ARGV[2]
local event_type = ARGV[3]
local events = ARGV[4]
local events_max = ARGV[5]

local last = redis.call('XREVRANGE', events_key, '+', '-', 'COUNT', 1)
if last[1] then
  local fields = last[1][2]
  for i = 1, #fields, 2 do
    if fields[i] == 'type' and fields[i + 1] == event_type then return 'already' end
  end
end
if redis.call('HGET', meta_key, 'status') ~= 'running' then return 'moved' end
local found = redis.call('ZSCORE', running_index_key, session_id)
if not found or tonumber(found) ~= tonumber(score) then return 'moved' end
add_events(events_key, events, events_max)
return 'flagged'
