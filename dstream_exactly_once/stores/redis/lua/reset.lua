-- reset_positions. KEYS: schema, epoch, offsets, pmeta, flat (the marker, deleted), plog (the position
-- log: {'fold'} unless empty). Sets p.keys[i] to p.values[i] with the
-- document p.docs[i] beside it ('' drops the key's document).
local f = fenced()
if f then return f end
if redis.call('HLEN', KEYS[6]) > 0 then return {'fold'} end
upgrade()
local pairs_, docs, drop = {}, {}, {}
for i, k in ipairs(p.keys) do
  pairs_[#pairs_ + 1] = k; pairs_[#pairs_ + 1] = p.values[i]
  local d = p.docs[i]
  if d ~= nil and d ~= '' then docs[#docs + 1] = k; docs[#docs + 1] = d else drop[#drop + 1] = k end
end
chunks(pairs_, 2000, function(...) redis.call('HSET', KEYS[3], ...) end)
chunks(docs, 2000, function(...) redis.call('HSET', KEYS[4], ...) end)
chunks(drop, 1000, function(...) redis.call('HDEL', KEYS[4], ...) end)
redis.call('DEL', KEYS[5])  -- positions moved outside the whole-batch sequence
return {'applied'}
