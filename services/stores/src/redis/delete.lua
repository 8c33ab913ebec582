-- Deletes messages and their index members together, so the index (index.rs) never names a key
-- that is gone. KEYS[1]: the id index; then msg:<id> ... Returns how many keys were deleted.
local deleted = 0
for i = 2, #KEYS do
  deleted = deleted + redis.call('UNLINK', KEYS[i])
  redis.call('ZREM', KEYS[1], KEYS[i])
end
return deleted
