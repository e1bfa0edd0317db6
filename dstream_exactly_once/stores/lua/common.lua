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
