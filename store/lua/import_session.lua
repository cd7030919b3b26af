-- Write a whole exported session, all or nothing: refused ('exists') before any write
-- when the session's meta, results or events are there already. The document was
-- checked in Python (store/export.py); it holds arrays only, in the order of the lanes'
-- and journals' KEYS. The session's status indexes and spec index are set, and a running
-- or paused session's queued jobs go on the stream (a paused one's are held at its
-- gate), its timers on the timers.
-- KEYS and ARGV by name, in the order of ImportKeys and ImportArgs (script_transfer.py):
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
local spec_index_key = KEYS[13]
local lanes_at = 14  -- KEYS[lanes_at..]: lanes
-- index: the last six KEYS, the status indexes (_lib.lua)
local session_id = ARGV[1]
local document = ARGV[2]
local now_ms = ARGV[3]
local lanes_count = ARGV[4]
local journal_keys_at = lanes_at + tonumber(lanes_count)  -- KEYS[journal_keys_at..]: journal_keys

for _, key in ipairs({meta_key, results_key, events_key, order_key}) do
  if redis.call('EXISTS', key) == 1 then return 'exists' end
end
local doc = cjson.decode(document)
local status = nil
for _, kv in ipairs(doc.meta) do if kv[1] == 'status' then status = kv[2] end end
local added, timed = {}, {}  -- what went on the shard's stream and timers
local function hset_pairs(key, pairs_list)
  for _, kv in ipairs(pairs_list) do redis.call('HSET', key, kv[1], kv[2]) end
end
local function rpush_all(key, items)
  for _, item in ipairs(items) do redis.call('RPUSH', key, item) end
end
local function write()
  hset_pairs(meta_key, doc.meta)
  hset_pairs(results_key, doc.results)
  rpush_all(order_key, doc.order)
  for _, event in ipairs(doc.events) do
    redis.call('XADD', events_key, event[1], unpack(event[2]))
  end
  for i, lane in ipairs(doc.lanes) do
    redis.call('SADD', conversations_key, lane[1])
    rpush_all(KEYS[lanes_at + i - 1], lane[2])
  end
  for i, journal in ipairs(doc.journals) do
    redis.call('SADD', journals_key, journal[1])
    hset_pairs(KEYS[journal_keys_at + i - 1], journal[2])
  end
  hset_pairs(artifacts_key, doc.artifacts)
  rpush_all(checkpoints_key, doc.checkpoints)
  hset_pairs(failed_key, doc.failed)
  rpush_all(held_key, doc.held)
  set_status(meta_key, session_id, status, tonumber(now_ms))
  if doc.spec_indexed then redis.call('ZADD', spec_index_key, tonumber(now_ms), session_id) end
  if status == 'running' or status == 'paused' then
    for _, job in ipairs(doc.queued) do added[#added + 1] = enqueue(stream_key, job) end
    for _, timer in ipairs(doc.timers) do
      redis.call('ZADD', timers_key, timer[1], timer[2])
      timed[#timed + 1] = timer[2]
    end
  end
end
-- A script is not rolled back when a command fails: on any failure, undo what was
-- written (every key of the session is new here), then answer the error.
local ok, failure = pcall(write)
if ok then return 'imported' end
for i = 1, journal_keys_at - 1 do
  if i <= 10 or i >= lanes_at then redis.call('DEL', KEYS[i]) end
end
for i = journal_keys_at, journal_keys_at + #doc.journals - 1 do redis.call('DEL', KEYS[i]) end
local idx = index_keys()
redis.call('ZREM', idx.all, session_id)
if status and idx[status] then redis.call('ZREM', idx[status], session_id) end
redis.call('ZREM', spec_index_key, session_id)
for _, id in ipairs(added) do redis.call('XDEL', stream_key, id) end
for _, member in ipairs(timed) do redis.call('ZREM', timers_key, member) end
return redis.error_reply('import failed, nothing written: ' .. tostring(failure and (failure.err or failure)))
