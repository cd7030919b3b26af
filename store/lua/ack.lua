-- Drop an entry that has nothing left to do: acknowledge and delete it together (a
-- script, not MULTI/EXEC: one slot, and Redis Cluster clients have no transactions).
-- KEYS and ARGV by name, in the order of StreamKeys (script_step.py) and AckArgs (script_operator.py):
local stream_key = KEYS[1]
local group = ARGV[1]
local entry_id = ARGV[2]

ack(stream_key, group, entry_id)
return 1
