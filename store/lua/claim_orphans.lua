-- Take entries of consumers declared dead (waiting under the holder) to run them now:
-- XCLAIM counts the delivery, as XAUTOCLAIM would. Each one's declaration records the
-- re-run (count, first and last time), so `durable workers` shows the time from the
-- dead worker's last beat to the re-run of its steps. `count`: at most this many.
-- Returns {1 when more wait under the holder else 0, entries: {id, fields, deliveries,
--          dead consumer ('' if unknown), ms since its last beat seen (-1 if unknown)}}
-- KEYS and ARGV by name, in the order of ClaimOrphansKeys and ClaimOrphansArgs (script_operator.py):
local stream_key = KEYS[1]
local orphans_key = KEYS[2]
local deaths_key = KEYS[3]
local group = ARGV[1]
local consumer = ARGV[2]
local holder = ARGV[3]
local count = ARGV[4]

local ok, pending = pcall(redis.call, 'XPENDING', stream_key, group, '-', '+',
  tonumber(count), holder)
if not ok or #pending == 0 then
  redis.call('DEL', orphans_key)  -- nothing waits: any record left is of an entry gone since
  return {0, {}}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {}
for _, p in ipairs(pending) do
  local got = redis.call('XCLAIM', stream_key, group, consumer, 0, p[1])
  local dead = redis.call('HGET', orphans_key, p[1])
  redis.call('HDEL', orphans_key, p[1])
  local raw = dead and redis.call('HGET', deaths_key, dead)
  if got[1] then  -- else its stream entry was deleted: it left the pending list
    local since = -1
    if raw then
      local record = cjson.decode(raw)
      record['reruns'] = (tonumber(record['reruns']) or 0) + 1
      record['rerun_first_ms'] = record['rerun_first_ms'] or now
      record['rerun_last_ms'] = now
      redis.call('HSET', deaths_key, dead, cjson.encode(record))
      since = now - (tonumber(record['at_ms']) - (tonumber(record['silent_ms']) or 0))
    end
    out[#out + 1] = {p[1], got[1][2], tonumber(p[4]) + 1, dead or '', since}
  end
end
local more = redis.call('XPENDING', stream_key, group, '-', '+', 1, holder)
return {#more > 0 and 1 or 0, out}
