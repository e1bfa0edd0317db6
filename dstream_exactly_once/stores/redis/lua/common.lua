-- Prepended to every write script of RedisStore (redis.py). KEYS[1] is the application's
-- layout-version key, KEYS[2] its epoch key; ARGV[1] is the JSON payload, with p.schema (the
-- layout version this library writes) and p.epoch (the committer's epoch; unused by epoch.lua).
local p = cjson.decode(ARGV[1])

-- A layout written by a newer library is refused before anything is read or written.
local layout = tonumber(redis.call('GET', KEYS[1]) or '0')
if layout > tonumber(p.schema) then return {'newer', tostring(layout)} end

-- Called once a script's checks have passed: creates (no key yet) or upgrades the layout. Version 1
-- -> 2 changes no data: the offsets hash already holds position keys, the pmeta hash is new.
local function upgrade()
  if layout < tonumber(p.schema) then
    redis.call('SET', KEYS[1], p.schema)
    layout = tonumber(p.schema)
  end
end

-- {'fenced', stored epoch} unless p.epoch is the application's current epoch, else nil.
local function fenced()
  local stored = redis.call('GET', KEYS[2]) or '0'
  if stored ~= p.epoch then return {'fenced', stored} end
  return nil
end

-- Variadic commands over long lists, in chunks (Lua's unpack() has a stack limit).
local function chunks(list, size, fn)
  for i = 1, #list, size do fn(unpack(list, i, math.min(i + size - 1, #list))) end
end

local function hmget(key, fields)
  local out = {}
  chunks(fields, 1000, function(...)
    for _, v in ipairs(redis.call('HMGET', key, ...)) do out[#out + 1] = v end
  end)
  return out
end

-- Store next positions values[i] of keys[i] in the offsets hash, with the document docs[i] in the
-- pmeta hash ('' = none: a position without a document drops its old one).
local function set_positions(offsets_key, pmeta_key, keys, values, docs)
  local offsets, with_doc, nodocs = {}, {}, {}
  for i, key in ipairs(keys) do
    offsets[#offsets + 1] = key; offsets[#offsets + 1] = values[i]
    if docs[i] ~= '' then with_doc[#with_doc + 1] = key; with_doc[#with_doc + 1] = docs[i]
    else nodocs[#nodocs + 1] = key end
  end
  chunks(offsets, 2000, function(...) redis.call('HSET', offsets_key, ...) end)
  chunks(with_doc, 2000, function(...) redis.call('HSET', pmeta_key, ...) end)
  if #nodocs > 0 and redis.call('EXISTS', pmeta_key) == 1 then
    chunks(nodocs, 1000, function(...) redis.call('HDEL', pmeta_key, ...) end)
  end
end

-- rows = {{key, next position, document ('' = none)}}: stored only for a key without a position.
local function init_positions(offsets_key, pmeta_key, rows)
  for _, r in ipairs(rows) do
    if redis.call('HSETNX', offsets_key, r[1], r[2]) == 1 and r[3] ~= '' then redis.call('HSET', pmeta_key, r[1], r[3]) end
  end
end
