-- reset_positions. KEYS: schema, epoch, offsets, pmeta. Sets p.keys[i] to p.values[i] and drops
-- their documents.
local f = fenced()
if f then return f end
upgrade()
local pairs_ = {}
for i, k in ipairs(p.keys) do pairs_[#pairs_ + 1] = k; pairs_[#pairs_ + 1] = p.values[i] end
chunks(pairs_, 2000, function(...) redis.call('HSET', KEYS[3], ...) end)
chunks(p.keys, 1000, function(...) redis.call('HDEL', KEYS[4], ...) end)
return {'applied'}
