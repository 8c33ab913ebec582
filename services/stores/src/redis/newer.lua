-- Writes each message only over an older version of its id (pipeline_common::version), so that
-- redelivery, and two versions written by two consumers in either order, leave the newer one.
-- KEYS[1]: the id index (index.rs); then msg:<id> ...   ARGV[1]: "gt" (the writer) or "ge"
-- (repair: the same version too); then per message key its version (decimal digits) and its
-- message JSON. Returns how many were written.
--
-- Every key this script leaves is in the index (a sorted set of keys, all at score 0; index.rs),
-- added in the same script, so the index never lags the keys: counting is ZCARD and a prefix is
-- a ZRANGEBYLEX, not a SCAN of the whole keyspace. ZADD of a member already there changes
-- nothing; a redelivery or a repair puts back a member that was lost.
--
-- Versions are compared as digit strings, by length and then lexicographically: Lua numbers are
-- doubles and would round versions above 2^53. The stored version is read with a pattern rather
-- than cjson.decode: `"version":` can only be the message's own key, because every `"` inside a
-- JSON string value is escaped. A value without one (written before versions) is version 0.
local index = KEYS[1]
local same_too = ARGV[1] == 'ge'
local written = 0
local function newer(v, cur)
  if #v ~= #cur then return #v > #cur end
  if same_too then return v >= cur end
  return v > cur
end
for i = 2, #KEYS do
  local key = KEYS[i]
  local v, json = ARGV[2 * i - 2], ARGV[2 * i - 1]
  local stored = redis.call('GET', key)
  local cur = stored and (string.match(stored, '"version":(%d+)') or '0')
  if not cur or newer(v, cur) then
    redis.call('SET', key, json)
    written = written + 1
  end
  redis.call('ZADD', index, 0, key)
end
return written
