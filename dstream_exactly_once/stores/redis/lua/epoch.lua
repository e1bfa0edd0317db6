-- start_epoch. KEYS: schema, epoch. Takes the next epoch (a fencing token).
upgrade()
return {'applied', tostring(redis.call('INCR', KEYS[2]))}
