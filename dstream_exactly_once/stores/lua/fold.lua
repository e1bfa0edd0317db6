-- fold the position log into the offsets hash (_position_log.py). KEYS: schema, epoch, offsets, pmeta,
-- plog. p.fields = the log's fields (batch ids) the caller read and merged: unless the log holds
-- exactly those, {'stale'} and nothing is written. p.sets = {keys, positions, documents ('' = none)}
-- stored whatever was there; p.inits = {{key, position, document}} stored only where no position is.
-- Folding changes no position as a reader sees it, so it needs no epoch.
if redis.call('HLEN', KEYS[5]) ~= #p.fields then return {'stale'} end
for _, field in ipairs(p.fields) do
  if redis.call('HEXISTS', KEYS[5], field) == 0 then return {'stale'} end
end
local keys, values, docs = p.sets[1], p.sets[2], p.sets[3]
local offsets, with_doc, nodocs = {}, {}, {}
for i, key in ipairs(keys) do
  offsets[#offsets + 1] = key; offsets[#offsets + 1] = values[i]
  if docs[i] ~= '' then with_doc[#with_doc + 1] = key; with_doc[#with_doc + 1] = docs[i]
  else nodocs[#nodocs + 1] = key end
end
chunks(offsets, 2000, function(...) redis.call('HSET', KEYS[3], ...) end)
chunks(with_doc, 2000, function(...) redis.call('HSET', KEYS[4], ...) end)
if #nodocs > 0 and redis.call('EXISTS', KEYS[4]) == 1 then
  chunks(nodocs, 1000, function(...) redis.call('HDEL', KEYS[4], ...) end)
end
for _, r in ipairs(p.inits) do
  if redis.call('HSETNX', KEYS[3], r[1], r[2]) == 1 and r[3] ~= '' then redis.call('HSET', KEYS[4], r[1], r[3]) end
end
chunks(p.fields, 1000, function(...) redis.call('HDEL', KEYS[5], ...) end)
return {'applied'}
