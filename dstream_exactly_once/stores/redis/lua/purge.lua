-- purge_logs. KEYS: schema, epoch, commits, batches. Drops committed batches with
-- id < last committed - keep + 1.
local f = fenced()
if f then return f end
upgrade()
local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
if #last == 0 then return {'purged', '0'} end
local below = tonumber(last[2]) - tonumber(p.keep) + 1
if below <= 0 then return {'purged', '0'} end
local dropped = 0
local entries = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', '(' .. below, 'WITHSCORES')
for i = 1, #entries, 2 do
  if redis.call('ZSCORE', KEYS[3], entries[i + 1]) then
    redis.call('ZREM', KEYS[4], entries[i])
    dropped = dropped + 1
  end
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. below)
return {'purged', tostring(dropped)}
