-- `durable run` runs its own session and nothing else, so it never reads the shared
-- group (XREADGROUP '>' hands out whatever entry is next, any session's). Instead it
-- takes its session's entries by id, atomically:
-- 'new': entries of the session after `cursor` that nobody was handed yet; XCLAIM ...
--   FORCE makes each pending under the caller (delivery count 1) and delivers nothing
--   else. A worker of the fleet may still read such an entry later (then the entry is
--   its own and the caller's commit is stale): a step runs at least once, commits once.
-- 'idle': entries of the session pending under another consumer and idle past
--   `min idle` (a worker died holding them), taken over as XAUTOCLAIM would.
-- KEYS: 1 stream. ARGV: 1 group, 2 consumer, 3 session id, 4 mode (new | idle),
--       5 cursor (new: the last entry id looked at, '0-0' at first; idle: where to go
--       on in the pending list, '-' at first), 6 at most this many to take, 7 at most
--       this many to look at, 8 min idle ms (idle)
-- Returns {cursor, taken entries ([id, fields]), 1 when the end was reached else 0}.
local stream, group, consumer, sid = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
local cursor, want, budget = ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[7])

local function sid_of(fields)
  for i = 1, #fields, 2 do
    if fields[i] == 'sid' then return fields[i + 1] end
  end
  return nil
end

local taken = {}
if ARGV[4] == 'new' then
  local entries = redis.call('XRANGE', stream, '(' .. cursor, '+', 'COUNT', budget)
  for _, e in ipairs(entries) do
    if #taken >= want then return {cursor, taken, 0} end
    cursor = e[1]
    if sid_of(e[2]) == sid and redis.call('XPENDING', stream, group, e[1], e[1], 1)[1] == nil then
      local got = redis.call('XCLAIM', stream, group, consumer, 0, e[1], 'RETRYCOUNT', 1,
                             'FORCE')
      if got[1] then taken[#taken + 1] = got[1] end
    end
  end
  return {cursor, taken, #entries < budget and 1 or 0}
end

local min_idle = tonumber(ARGV[8])
local pending = redis.call('XPENDING', stream, group, 'IDLE', min_idle, cursor, '+', budget)
for _, p in ipairs(pending) do
  if #taken >= want then return {'(' .. cursor, taken, 0} end
  cursor = p[1]
  if p[2] ~= consumer then
    local entry = redis.call('XRANGE', stream, p[1], p[1])[1]
    if entry and sid_of(entry[2]) == sid then
      local got = redis.call('XCLAIM', stream, group, consumer, min_idle, p[1])
      if got[1] then taken[#taken + 1] = got[1] end
    end
  end
end
if #pending < budget then return {'-', taken, 1} end
return {'(' .. cursor, taken, 0}
