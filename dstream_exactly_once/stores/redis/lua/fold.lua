-- fold the position log into the offsets hash (_position_log.py). KEYS: schema, epoch, offsets, pmeta,
-- plog. p.fields = the log's fields (batch ids) the caller read and merged: unless the log holds
-- exactly those, {'stale'} and nothing is written. p.sets = {keys, positions, documents ('' = none)}
-- stored whatever was there; p.inits = {{key, position, document}} stored only where no position is.
-- Folding changes no position as a reader sees it, so it needs no epoch.
if redis.call('HLEN', KEYS[5]) ~= #p.fields then return {'stale'} end
for _, field in ipairs(p.fields) do
  if redis.call('HEXISTS', KEYS[5], field) == 0 then return {'stale'} end
end
set_positions(KEYS[3], KEYS[4], p.sets[1], p.sets[2], p.sets[3])
init_positions(KEYS[3], KEYS[4], p.inits)
chunks(p.fields, 1000, function(...) redis.call('HDEL', KEYS[5], ...) end)
return {'applied'}
