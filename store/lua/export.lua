-- Read a whole session in one script, so a session that runs while it is exported is
-- read at one instant: its meta, results, order, events, conversation lanes, journals,
-- artifacts, checkpoints, failed and held jobs, and its jobs queued on the shard's stream
-- and timers. The reply is JSON (store/export.py decodes it); nil when there is no
-- session. The lanes and journals are spelled from their prefixes, in the slot.
-- KEYS and ARGV by name, in the order of ExportKeys and ExportArgs (script_transfer.py):
local meta_key = KEYS[1]
local results_key = KEYS[2]
local order_key = KEYS[3]
local events_key = KEYS[4]
local conversations_key = KEYS[5]
local journals_key = KEYS[6]
local artifacts_key = KEYS[7]
local checkpoints_key = KEYS[8]
local failed_key = KEYS[9]
local held_key = KEYS[10]
local stream_key = KEYS[11]
local timers_key = KEYS[12]
local unwritten_key = KEYS[13]
local session_id = ARGV[1]
local conversation_prefix = ARGV[2]
local journal_prefix = ARGV[3]

if redis.call('EXISTS', meta_key) == 0 then return false end
redis.call('EXISTS', unwritten_key)
local doc = {
  meta = redis.call('HGETALL', meta_key),
  results = redis.call('HGETALL', results_key),
  order = redis.call('LRANGE', order_key, 0, -1),
  events = redis.call('XRANGE', events_key, '-', '+'),
  artifacts = redis.call('HGETALL', artifacts_key),
  checkpoints = redis.call('LRANGE', checkpoints_key, 0, -1),
  failed = redis.call('HGETALL', failed_key),
  held = redis.call('LRANGE', held_key, 0, -1),
  lanes = {}, journals = {}, queued = {}, timers = {},
}
for _, lane in ipairs(redis.call('SMEMBERS', conversations_key)) do
  doc.lanes[#doc.lanes + 1] = {lane, redis.call('LRANGE', conversation_prefix .. lane, 0, -1)}
end
for _, step in ipairs(redis.call('SMEMBERS', journals_key)) do
  doc.journals[#doc.journals + 1] = {step, redis.call('HGETALL', journal_prefix .. step)}
end
-- Acked entries are deleted, so the stream holds only what is queued or running.
for _, entry in ipairs(redis.call('XRANGE', stream_key, '-', '+')) do
  local fields, sid, job = entry[2], nil, nil
  for i = 1, #fields, 2 do
    if fields[i] == 'sid' then sid = fields[i + 1] elseif fields[i] == 'job' then job = fields[i + 1] end
  end
  if sid == session_id and job then doc.queued[#doc.queued + 1] = job end
end
local timers = redis.call('ZRANGE', timers_key, 0, -1, 'WITHSCORES')
for i = 1, #timers, 2 do
  if string.find(timers[i], session_id, 1, true) then
    doc.timers[#doc.timers + 1] = {timers[i + 1], timers[i]}
  end
end
return cjson.encode(doc)
