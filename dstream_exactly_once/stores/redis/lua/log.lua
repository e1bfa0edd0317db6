-- log_batch. KEYS: schema, epoch, batches. Logs the batch unless an entry with its id exists
-- (returned for comparison).
local f = fenced()
if f then return f end
upgrade()
local existing = redis.call('ZRANGEBYSCORE', KEYS[3], p.batch, p.batch)
if #existing > 0 then return {'exists', existing[1]} end
redis.call('ZADD', KEYS[3], p.batch, p.entry)
return {'applied'}
