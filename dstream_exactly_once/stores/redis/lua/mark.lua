-- mark_committed. KEYS: schema, epoch, commits, offsets, pmeta, flat (the marker, deleted), plog (the
-- position log: {'fold'} unless empty). Every non-empty range must be at its end (p.ranges = {{position
-- key, end}}); p.drop = position keys whose position and document are deleted.
local f = fenced()
if f then return f end
if redis.call('ZSCORE', KEYS[3], p.batch) then return {'replayed'} end
if redis.call('HLEN', KEYS[7]) > 0 then return {'fold'} end
for _, r in ipairs(p.ranges) do
  local cur = redis.call('HGET', KEYS[4], r[1])
  if cur ~= r[2] then return {'uncommitted', r[1], cur or ''} end
end
upgrade()
if p.drop and #p.drop > 0 then
  chunks(p.drop, 1000, function(...) redis.call('HDEL', KEYS[4], ...) end)
  chunks(p.drop, 1000, function(...) redis.call('HDEL', KEYS[5], ...) end)
end
redis.call('DEL', KEYS[6])  -- positions moved outside the whole-batch sequence
redis.call('ZADD', KEYS[3], p.batch, p.batch)
return {'applied'}
