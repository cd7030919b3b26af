-- Take one model request's share of a provider key's capacity, or say how long to wait.
-- The key's state is shared by the whole fleet: declared limits (the operator's, passed
-- by every caller), the limits learned from throttling (capacity_throttled.lua), a
-- request bucket, a token bucket, the leases of requests in flight (each expires by
-- itself: a worker that dies returns its share within lease_ttl) and a shared backoff.
--
-- A process asks for its waiting requests together, one candidate per session (the head
-- of that session's queue there). Capacity goes round the sessions that wait (fair
-- share): each waiting session has a pass; a grant moves it on by 1 / weight (its
-- priority), a session that starts waiting joins at the pass last served, and no
-- candidate is granted while it is more than LAG ahead of the least-served session that
-- waits anywhere in the fleet (that one's process is asking too: it gets the capacity).
-- A candidate may carry its spec's own lower limits (a scope: own buckets and leases).
--
-- KEYS and ARGV by name, in the order of AcquireKeys and AcquireArgs (script_capacity.py):
local state_key = KEYS[1]
local leases_key = KEYS[2]
local waiting_key = KEYS[3]
local queue_key = KEYS[4]
local queue_expiry_key = KEYS[5]
local passes_key = KEYS[6]
local scope_keys_at = 7  -- KEYS[scope_keys_at..]: scope_keys
local now_ms = ARGV[1]
local lease_ttl_ms = ARGV[2]
local declared_rpm = ARGV[3]
local declared_tpm = ARGV[4]
local declared_in_flight = ARGV[5]
local wait_cap_ms = ARGV[6]
local process = ARGV[7]
local waiting_here = ARGV[8]
local candidates = ARGV[9]
local scopes = ARGV[10]

-- waiting_key: process -> 'n|expiry ms'; queue_key: waiting session -> pass;
-- queue_expiry_key: waiting session -> when it lapses; passes_key: session -> pass,
-- kept between its waits; scope_keys: two per scope, its state hash and leases zset.
-- candidates: JSON [[session, weight, estimated tokens, lease id, requests of the session
-- waiting here, scope (0: none, else its place in scopes)], ...]; scopes: JSON
-- [[rpm, tpm, in flight], ...]. Reply: {granted 0|1, wait ms, reason, rpm in force,
-- in flight limit in force, in flight, granted session, granted lease id, learned rpm}
local now, lease_ttl = tonumber(now_ms), tonumber(lease_ttl_ms)
local rpm_declared, tpm = tonumber(declared_rpm), tonumber(declared_tpm)
local inflight_declared, wait_cap = tonumber(declared_in_flight), tonumber(wait_cap_ms)
local here_total = tonumber(waiting_here)
local wanted, scope_limits = cjson.decode(candidates), cjson.decode(scopes)
local REGISTRATION_MS = 3000  -- a waiting session not asked for again lapses after this
local LAG = 1.0  -- how far (in grants at weight 1) a session may run ahead of the least served
local DAY_MS = 86400000
-- A declared requests-per-minute limit is paced at this share of it: a provider counts
-- requests over windows shorter than a minute and arrivals jitter, so a fleet paced at
-- the limit exactly sees one request in a few land in a full window (a learned rate is
-- already under the limit the provider named: capacity_throttled.lua).
local DECLARED_PACE = 0.95

local f = redis.call('HMGET', state_key, 'learned_rpm', 'learned_inflight', 'req_tokens',
  'req_ts', 'tok_tokens', 'tok_ts', 'backoff_until', 'obs_count', 'obs_start', 'vt')
local learned_rpm, learned_inflight = tonumber(f[1]) or 0, tonumber(f[2]) or 0
local backoff_until = tonumber(f[7]) or 0
local obs_count, obs_start = tonumber(f[8]) or 0, tonumber(f[9]) or now
local vt = tonumber(f[10]) or 0

local function smallest(a, b)
  if a <= 0 then return b end
  if b <= 0 then return a end
  return math.min(a, b)
end
local rpm = smallest(rpm_declared, learned_rpm)
local inflight_limit = math.floor(smallest(inflight_declared, learned_inflight))

redis.call('ZREMRANGEBYSCORE', leases_key, '-inf', now)
local inflight = redis.call('ZCARD', leases_key)

-- Requests: a bucket refilled at rpm/60 a second, holding a tenth of a second's worth:
-- providers enforce a minute's limit over short windows too, so requests are spread out.
-- At least one request and LATE_MS more: told to wait, the fleet's pollers ask a few ms
-- after the request is due (jitter, the loop, the round trip), and a bucket that held one
-- exactly lost that time at every grant (4-5% of a 10-a-second limit). Any second still
-- holds at most 1 + 1.02 x its rate's requests: under a limit paced at 0.95 of it.
local LATE_MS = 20
local function request_bucket(limit, tokens, ts, paced)
  if limit <= 0 then return nil, 0 end
  local rate = (paced or limit) / 60000  -- per ms
  local burst = math.max(1 + LATE_MS * rate, limit / 600)
  local left = math.min(burst, (tonumber(tokens) or burst) + (now - (tonumber(ts) or now)) * rate)
  if left < 1 then return left, (1 - left) / rate end
  return left, 0
end
-- Tokens: refilled at tpm/60 a second, holding ten seconds' worth (at least this request).
local function token_bucket(limit, tokens, ts, est)
  if limit <= 0 then return nil, 0 end
  local rate = limit / 60000
  local burst = math.max(est, limit / 6)
  local left = math.min(burst, (tonumber(tokens) or burst) + (now - (tonumber(ts) or now)) * rate)
  if left < est then return left, (est - left) / rate end
  return left, 0
end
local function first_expiry_wait(key)
  local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  return math.min(100, first[2] and (tonumber(first[2]) - now) or 100)
end

-- Sessions that stopped asking (their process gone, their requests served elsewhere).
local lapsed = redis.call('ZRANGEBYSCORE', queue_expiry_key, '-inf', now, 'LIMIT', 0, 100)
for _, session in ipairs(lapsed) do
  redis.call('ZREM', queue_key, session)
  redis.call('ZREM', queue_expiry_key, session)
end

-- Each scope's own limits (a spec's, lower than the fleet's): open now, or its wait.
local scope_state = {}
for i, limits in ipairs(scope_limits) do
  local skey = KEYS[scope_keys_at + 2 * i - 2]
  local lkey = KEYS[scope_keys_at + 2 * i - 1]
  redis.call('ZREMRANGEBYSCORE', lkey, '-inf', now)
  local s = redis.call('HMGET', skey, 'req_tokens', 'req_ts', 'tok_tokens', 'tok_ts')
  local entry = {skey = skey, lkey = lkey, rpm = tonumber(limits[1]), tpm = tonumber(limits[2]),
                 wait = 0, reason = '', fields = s}
  local held = redis.call('ZCARD', lkey)
  if tonumber(limits[3]) > 0 and held >= tonumber(limits[3]) then
    entry.wait, entry.reason = first_expiry_wait(lkey), 'spec_in_flight'
  else
    local left, wait = request_bucket(entry.rpm, s[1], s[2])
    entry.req_left = left
    if wait > 0 then entry.wait, entry.reason = wait, 'spec_requests_per_minute' end
  end
  scope_state[i] = entry
end

-- The candidates join the queue of waiting sessions (at the pass last served, or their
-- own if they were served further on before). One held by its own spec's limit waits
-- for that, not for the fleet: it leaves the queue and holds no one back.
local open = {}
local best_wait, best_reason = nil, nil
local function consider(ms, reason)
  if best_wait == nil or ms < best_wait then best_wait, best_reason = ms, reason end
end
for order, c in ipairs(wanted) do
  local session = c[1]
  local pass = tonumber(redis.call('ZSCORE', queue_key, session))
  if not pass then pass = math.max(vt, tonumber(redis.call('HGET', passes_key, session)) or 0) end
  local scope = scope_state[tonumber(c[6])]
  if scope and scope.wait > 0 then
    redis.call('ZREM', queue_key, session)
    redis.call('ZREM', queue_expiry_key, session)
    redis.call('HSET', passes_key, session, pass)
    consider(scope.wait, scope.reason)
  else
    redis.call('ZADD', queue_key, pass, session)
    redis.call('ZADD', queue_expiry_key, now + REGISTRATION_MS, session)
    open[#open + 1] = {session = session, weight = math.max(0.01, tonumber(c[2])),
      est = tonumber(c[3]), lease = c[4], here = tonumber(c[5]), scope = scope,
      pass = pass, order = order}
  end
end

local function reply_wait(ms, reason)
  if here_total > 0 then
    redis.call('HSET', waiting_key, process, here_total .. '|' .. (now + REGISTRATION_MS))
  end
  redis.call('PEXPIRE', waiting_key, DAY_MS)
  redis.call('PEXPIRE', queue_key, DAY_MS)
  redis.call('PEXPIRE', queue_expiry_key, DAY_MS)
  redis.call('PEXPIRE', passes_key, DAY_MS)
  return {0, math.max(1, math.min(wait_cap, math.ceil(ms))), reason, tostring(rpm),
          inflight_limit, inflight, '', '', tostring(learned_rpm)}
end

if #open == 0 then return reply_wait(best_wait or 100, best_reason or 'in_flight') end
if backoff_until > now then return reply_wait(backoff_until - now, 'backoff') end
if inflight_limit > 0 and inflight >= inflight_limit then
  -- A lease ends when its request does: look again soon (a slice of the earliest expiry).
  return reply_wait(first_expiry_wait(leases_key), 'in_flight')
end
local req_left, req_wait = request_bucket(rpm, f[3], f[4],
  smallest(rpm_declared * DECLARED_PACE, learned_rpm))
if req_wait > 0 then return reply_wait(req_wait, 'requests_per_minute') end

-- Fair share: the lowest pass first, never more than LAG ahead of the least served.
table.sort(open, function(a, b)
  if a.pass == b.pass then return a.order < b.order end
  return a.pass < b.pass
end)
local least = tonumber(redis.call('ZRANGE', queue_key, 0, 0, 'WITHSCORES')[2]) or open[1].pass
local chosen, tok_left = nil, nil
for _, c in ipairs(open) do
  if c.pass > least + LAG then
    consider(20, 'fair_share')  -- the least served session's process is asking too
    break
  end
  local left, wait = token_bucket(tpm, f[5], f[6], c.est)
  local scope_tok, scope_wait = nil, 0
  if c.scope then
    scope_tok, scope_wait = token_bucket(c.scope.tpm, c.scope.fields[3], c.scope.fields[4], c.est)
  end
  if wait > 0 then
    consider(wait, 'tokens_per_minute')
  elseif scope_wait > 0 then
    consider(scope_wait, 'spec_tokens_per_minute')
  else
    chosen, tok_left, c.scope_tok = c, left, scope_tok
    break
  end
end
if not chosen then return reply_wait(best_wait or 20, best_reason or 'fair_share') end

if req_left then redis.call('HSET', state_key, 'req_tokens', tostring(req_left - 1), 'req_ts', now) end
if tok_left then redis.call('HSET', state_key, 'tok_tokens', tostring(tok_left - chosen.est), 'tok_ts', now) end
local scope = chosen.scope
if scope then
  if scope.req_left then
    redis.call('HSET', scope.skey, 'req_tokens', tostring(scope.req_left - 1), 'req_ts', now)
  end
  if chosen.scope_tok then
    redis.call('HSET', scope.skey, 'tok_tokens', tostring(chosen.scope_tok - chosen.est), 'tok_ts', now)
  end
  redis.call('ZADD', scope.lkey, now + lease_ttl, chosen.lease)
  redis.call('PEXPIRE', scope.skey, DAY_MS)
  redis.call('PEXPIRE', scope.lkey, DAY_MS)
end
-- The request rate seen lately: what a first throttle halves when nothing is declared.
if now - obs_start > 10000 then
  redis.call('HSET', state_key, 'obs_prev', obs_count / math.max(1, now - obs_start) * 60000)
  obs_count, obs_start = 0, now
end
-- Served: the session moves on by its stride; the virtual time reaches its start.
local next_pass = chosen.pass + 1 / chosen.weight
redis.call('HSET', state_key, 'obs_count', obs_count + 1, 'obs_start', obs_start,
  'vt', tostring(math.max(vt, chosen.pass)))
if chosen.here <= 1 then
  -- Nothing more of it waits here: it leaves the queue (another process's waiters bring
  -- it back at its pass), so a session no longer waiting holds no one back.
  redis.call('ZREM', queue_key, chosen.session)
  redis.call('ZREM', queue_expiry_key, chosen.session)
else
  redis.call('ZADD', queue_key, next_pass, chosen.session)
end
redis.call('HSET', passes_key, chosen.session, tostring(next_pass))
local granted_count = redis.call('HINCRBY', state_key, 'granted', 1)
if granted_count % 512 == 0 and redis.call('HLEN', passes_key) > 4096 then
  -- Passes at or below the virtual time say nothing a newcomer's would not (looked at
  -- once in 512 grants: the hash may hold thousands of sessions served lately).
  local all = redis.call('HGETALL', passes_key)
  for i = 1, #all, 2 do
    if tonumber(all[i + 1]) <= vt then redis.call('HDEL', passes_key, all[i]) end
  end
end
if here_total > 1 then
  redis.call('HSET', waiting_key, process, (here_total - 1) .. '|' .. (now + REGISTRATION_MS))
else
  redis.call('HDEL', waiting_key, process)
end
redis.call('ZADD', leases_key, now + lease_ttl, chosen.lease)
redis.call('PEXPIRE', state_key, DAY_MS)
redis.call('PEXPIRE', leases_key, DAY_MS)
redis.call('PEXPIRE', passes_key, DAY_MS)
return {1, 0, '', tostring(rpm), inflight_limit, inflight + 1, chosen.session, chosen.lease,
        tostring(learned_rpm)}
