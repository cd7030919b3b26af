-- `durable run` runs its own session and nothing else, so it never reads the shared
-- group (XREADGROUP '>' hands out whatever entry is next, any session's). Instead it
-- takes its session's entries by id, atomically:
-- 'new': entries of the session after `cursor` that nobody was handed yet; XCLAIM ...
--   FORCE makes each pending under the caller (delivery count 1) and delivers nothing
--   else. A worker of the fleet may still read such an entry later (then the entry is
--   its own and the caller's commit is stale): a step runs at least once, commits once.
-- 'idle': entries of the session pending under another consumer and idle past
--   `min_idle_ms` (a worker died holding them), taken over as XAUTOCLAIM would.
-- `cursor`: new: the last entry id looked at, '0-0' at first; idle: where to go on in
-- the pending list, '-' at first. `count`: at most this many to take; `scan`: at most
-- this many to look at.
-- Returns {cursor, taken entries ([id, fields]), 1 when the end was reached else 0}.
-- KEYS and ARGV by name, in the order of StreamKeys and ClaimSessionArgs (script_step.py):
local stream_key = KEYS[1]
local group = ARGV[1]
local consumer = ARGV[2]
local session_id = ARGV[3]
local mode = ARGV[4]
local cursor = ARGV[5]
local count = ARGV[6]
local scan = ARGV[7]
local min_idle_ms = ARGV[8]

local at = cursor
local want, budget = tonumber(count), tonumber(scan)

local function sid_of(fields)
  for i = 1, #fields, 2 do
    if fields[i] == 'sid' then return fields[i + 1] end
  end
  return nil
end

local taken = {}
if mode == 'new' then
  local entries = redis.call('XRANGE', stream_key, '(' .. at, '+', 'COUNT', budget)
  for _, e in ipairs(entries) do
    if #taken >= want then return {at, taken, 0} end
    at = e[1]
    if sid_of(e[2]) == session_id
        and redis.call('XPENDING', stream_key, group, e[1], e[1], 1)[1] == nil then
      local got = redis.call('XCLAIM', stream_key, group, consumer, 0, e[1], 'RETRYCOUNT', 1,
                             'FORCE')
      if got[1] then taken[#taken + 1] = got[1] end
    end
  end
  return {at, taken, #entries < budget and 1 or 0}
end

local min_idle = tonumber(min_idle_ms)
local pending = redis.call('XPENDING', stream_key, group, 'IDLE', min_idle, at, '+', budget)
for _, p in ipairs(pending) do
  if #taken >= want then return {'(' .. at, taken, 0} end
  at = p[1]
  if p[2] ~= consumer then
    local entry = redis.call('XRANGE', stream_key, p[1], p[1])[1]
    if entry and sid_of(entry[2]) == session_id then
      local got = redis.call('XCLAIM', stream_key, group, consumer, min_idle, p[1])
      if got[1] then taken[#taken + 1] = got[1] end
    end
  end
end
if #pending < budget then return {'-', taken, 1} end
return {'(' .. at, taken, 0}
