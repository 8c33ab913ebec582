-- Writes each message only over an older version of its id (pipeline_common::version), so that
-- redelivery, and two versions written by two consumers in either order, leave the newer one.
-- KEYS: msg:<id> ...   ARGV[1]: "gt" (the writer) or "ge" (repair: the same version too);
-- then per key its version (decimal digits) and its message JSON. Returns how many were written.
--
-- Versions are compared as digit strings, by length and then lexicographically: Lua numbers are
-- doubles and would round versions above 2^53. The stored version is read with a pattern rather
-- than cjson.decode: `"version":` can only be the message's own key, because every `"` inside a
-- JSON string value is escaped. A value without one (written before versions) is version 0.
local same_too = ARGV[1] == 'ge'
local written = 0
local function newer(v, cur)
  if #v ~= #cur then return #v > #cur end
  if same_too then return v >= cur end
  return v > cur
end
for i, key in ipairs(KEYS) do
  local v, json = ARGV[2 * i], ARGV[2 * i + 1]
  local stored = redis.call('GET', key)
  local cur = stored and (string.match(stored, '"version":(%d+)') or '0')
  if not cur or newer(v, cur) then
    redis.call('SET', key, json)
    written = written + 1
  end
end
return written
