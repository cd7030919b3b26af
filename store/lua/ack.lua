-- Drop an entry that has nothing left to do: acknowledge and delete it together (a
-- script, not MULTI/EXEC: one slot, and Redis Cluster clients have no transactions).
-- KEYS: 1 stream. ARGV: 1 group, 2 entry id
ack(KEYS[1], ARGV[1], ARGV[2])
return 1
