-- Rewrite a token's record (a revocation) only if the token exists: a record deleted
-- meanwhile is not brought back.
-- KEYS and ARGV by name, in the order of TokenSaveKeys and TokenSaveArgs (script_access.py):
local tokens_key = KEYS[1]
local token_id = ARGV[1]
local record = ARGV[2]

if redis.call('HEXISTS', tokens_key, token_id) == 0 then return 0 end
redis.call('HSET', tokens_key, token_id, record)
return 1
