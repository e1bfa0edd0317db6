-- delete_app. KEYS: schema, epoch, then every other key of the application (its hash tag: one slot).
-- Deletes them all if p.epoch is the application's current epoch; a fenced epoch deletes nothing.
local f = fenced()
if f then return f end
local deleted = 0
chunks(KEYS, 1000, function(...) deleted = deleted + redis.call('DEL', ...) end)
return {'deleted', tostring(deleted)}
