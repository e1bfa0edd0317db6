-- heartbeat. KEYS: schema, epoch, heartbeat. Replaces the driver's heartbeat document (p.doc) if
-- p.epoch is the application's current epoch; touches nothing else.
local f = fenced()
if f then return f end
upgrade()
redis.call('SET', KEYS[3], p.doc)
return {'applied'}
