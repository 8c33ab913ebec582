-- One step of an index rebuild (index.rs): KEYS[1] is the id index, the rest message keys that a
-- SCAN of the keyspace or of the index returned. A key that exists is made a member, a member
-- whose key is gone is removed, both inside one script, so a write or a delete that lands
-- between the walk and this step is never undone by it.
for i = 2, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    redis.call('ZADD', KEYS[1], 0, KEYS[i])
  else
    redis.call('ZREM', KEYS[1], KEYS[i])
  end
end
return #KEYS - 1
