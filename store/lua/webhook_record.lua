-- Record a session's webhook events in its shard's outbox, with the session's cursor
-- (the last event looked at) and the scan's note that the session was seen, in one
-- step: a leader that dies before it leaves the cursor where it was, and one that
-- races another finds the cursor moved and writes nothing ('moved'). An entry id
-- already in the outbox is not written again (HSETNX).
-- KEYS and ARGV by name, in the order of RecordKeys and RecordArgs (webhooks.py):
local meta_key = KEYS[1]
local cursor_key = KEYS[2]
local outbox_key = KEYS[3]
local pending_key = KEYS[4]
local seen_key = KEYS[5]
local expected_cursor = ARGV[1]
local new_cursor = ARGV[2]
local seen_member = ARGV[3]
local seen_score = ARGV[4]
local now_ms = ARGV[5]
local entries = ARGV[6]

redis.call('ZADD', seen_key, seen_score, seen_member)
-- A deleted session: nothing to record, and no key of it written back.
if redis.call('EXISTS', meta_key) == 0 then return {'gone', 0} end
local current = redis.call('HGET', cursor_key, 'cursor') or ''
if current ~= expected_cursor then return {'moved', 0} end
local added = 0
for _, entry in ipairs(cjson.decode(entries)) do
  if redis.call('HSETNX', outbox_key, entry[1], entry[2]) == 1 then
    redis.call('ZADD', pending_key, now_ms, entry[1])
    added = added + 1
  end
end
if new_cursor ~= '' then redis.call('HSET', cursor_key, 'cursor', new_cursor) end
return {'ok', added}
