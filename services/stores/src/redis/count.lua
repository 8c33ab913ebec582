-- The number of messages, from the id index (index.rs), when the index can be trusted; -1 when
-- it cannot. KEYS[1]: the id index.
--
-- Trusted: the marker ("") is a member, and the database holds exactly one key per member
-- (the messages, plus the index itself for the marker). A key the index does not name (a plain
-- SET by a writer from before the index, still running during an upgrade) or a member whose key
-- is gone (an older reconcile's delete) makes the two differ: the marker is dropped, so counts
-- and audits SCAN until the next prepare rebuilds. A database that also holds keys of another
-- kind is never trusted, and is counted by SCAN as before.
if not redis.call('ZSCORE', KEYS[1], '') then return -1 end
local members = redis.call('ZCARD', KEYS[1])
if redis.call('DBSIZE') ~= members then
  redis.call('ZREM', KEYS[1], '')
  return -1
end
return members - 1
