-- commit. KEYS: schema, epoch, commits, offsets, pmeta, labels, batches (the offset log), then per
-- namespace i (0-based): vi, vf, vj, rows, vb at 8+5i..12+5i, and last the position log (hash) and
-- the flat marker (string).
-- p.whole: the commit covers the whole batch (p.prev = its id - 1, as text); p.known (optional): the
-- marker p.empty was cut for (only the empty ranges whose position may be absent): another marker
-- returns {'stale'} and nothing is written. vb holds an upper bound of the
-- magnitudes in vi (absent: not known yet; made from HVALS by the next increment of the namespace),
-- so an increment needs the exact per-key overflow check (one HMGET) only when bound + its largest
-- amount could reach 9.0e18.
-- p.entry (optional) = the batch's offset-log entry, written in this commit unless an identical
-- one is logged (another one is returned as {'logged', existing} and nothing is written).
-- p.ranges = {position keys, starts, ends, documents ('' = none)} of the non-empty ranges;
-- p.empty = {{key, end, document}} of the empty ones; p.groups = {{namespace index, kind, keys,
-- values[, largest magnitude of the values ("ai")]}} with kind "ai"/"af" (increment an int/float)
-- or "si"/"sf"/"sj" (set an int/float/JSON document); p.drop = position keys whose position and
-- document the commit deletes. p.plog (optional): the commit's positions as one position-log entry
-- (_position_log.py), written instead of p.ranges/p.empty when the flat rule applies and the log
-- holds fewer than p.fold_at entries (p.replace: the entry sets every stored position, given by the
-- marker p.known, and replaces the log's entries); otherwise {'stale'} or {'fold'} and nothing is written. Without
-- p.plog, a non-empty position log returns {'fold'}: it is folded into the offsets hash first.
-- Everything is checked before the first
-- write (a Lua script is not rolled back on error), with one HMGET per hash rather than one call
-- per key.
local f = fenced()
if f then return f end
if redis.call('ZSCORE', KEYS[3], p.batch) then return {'replayed'} end
local log_it = false
if p.entry then
  local existing = redis.call('ZRANGEBYSCORE', KEYS[7], p.batch, p.batch)
  if #existing == 0 then log_it = true
  elseif existing[1] ~= p.entry then return {'logged', existing[1]} end
end
local fields, from, untl, metas = p.ranges[1], p.ranges[2], p.ranges[3], p.ranges[4]
-- The flat rule (_commit_rules.decide_flat): the marker "<epoch>:<batch id>" names the last batch
-- committed whole under this epoch; the batch right after it applies without comparing positions,
-- any other is refused; without a marker of this epoch the per-range compare-and-set decides.
local marker = redis.call('GET', KEYS[#KEYS])
local plog = KEYS[#KEYS - 1]
local flat = false
if p.whole and marker then
  local m_epoch, m_batch = string.match(marker, '^(%d+):(%d+)$')
  if m_epoch == p.epoch then
    if m_batch ~= p.prev then return {'gap', m_batch} end
    flat = true
  end
end
if (p.known or p.plog) and not flat then return {'stale'} end  -- p.empty was cut for the marker p.known
if not p.replace and redis.call('HLEN', plog) >= (p.plog and tonumber(p.fold_at) or 1) then return {'fold'} end
if not flat then
  local applied, done = {}, {}
  local stored = hmget(KEYS[4], fields)
  for i, cur in ipairs(stored) do
    if cur == false or cur == from[i] then applied[#applied + 1] = fields[i]
    elseif cur == untl[i] then done[#done + 1] = fields[i]
    else return {'conflict', fields[i], cur} end
  end
  if #done > 0 then
    if #applied == 0 then return {'replayed'} end
    return {'mixed', cjson.encode(applied), cjson.encode(done)}
  end
end
local function largest(texts)  -- the largest magnitude of some integers given as text
  local m = 0
  for _, t in ipairs(texts) do m = math.max(m, math.abs(tonumber(t))) end
  return m
end
local put_max, bounds = {}, {}  -- per namespace index: largest int put of this commit; vb key -> new bound
for _, g in ipairs(p.groups) do
  if g[2] == 'si' then put_max[g[1]] = math.max(put_max[g[1]] or 0, largest(g[4])) end
end
for _, g in ipairs(p.groups) do
  local base, kind, keys, values = 7 + 5 * g[1], g[2], g[3], g[4]
  if kind == 'ai' or kind == 'af' then
    if redis.call('HLEN', KEYS[base + 3]) > 0 then  -- only namespaces holding JSON documents need the check
      for i, doc in ipairs(hmget(KEYS[base + 3], keys)) do
        if doc then return {'notnumber', keys[i]} end
      end
    end
    local exact = kind == 'af'
    if kind == 'ai' then
      local b = tonumber(redis.call('GET', KEYS[base + 5]) or '-1')
      if b < 0 then b = largest(redis.call('HVALS', KEYS[base + 1])) end
      b = math.max(b, put_max[g[1]] or 0) + tonumber(g[5])
      bounds[KEYS[base + 5]] = b
      exact = b >= 9.0e18
    end
    local olds = exact and hmget(KEYS[base + ((kind == 'ai') and 1 or 2)], keys) or {}
    for i, old in ipairs(olds) do
      local v = values[i]
      -- integers of at most 18 characters are below 10^18 in magnitude: their sum cannot overflow
      if kind == 'af' or (old and #old > 18) or #v > 18 then
        local total = tonumber(old or '0') + tonumber(v)
        if kind == 'ai' then
          if total >= 9.2e18 or total <= -9.2e18 then return {'overflow', keys[i]} end
        elseif total ~= total or total == math.huge or total == -math.huge then return {'overflow', keys[i]} end
      end
    end
  end
end
for _, g in ipairs(p.groups) do  -- int puts into a namespace with a known bound and no increment here
  local vb = KEYS[7 + 5 * g[1] + 5]
  if g[2] == 'si' and not bounds[vb] then
    local b = redis.call('GET', vb)
    if b then bounds[vb] = math.max(tonumber(b), put_max[g[1]]) end
  end
end
upgrade()
for vb, b in pairs(bounds) do redis.call('SET', vb, string.format('%.17g', b)) end
for _, g in ipairs(p.groups) do
  local base, kind, keys, values = 7 + 5 * g[1], g[2], g[3], g[4]
  if kind == 'ai' then
    for i, k in ipairs(keys) do redis.call('HINCRBY', KEYS[base + 1], k, values[i]) end
  elseif kind == 'af' then
    for i, k in ipairs(keys) do redis.call('HINCRBYFLOAT', KEYS[base + 2], k, values[i]) end
  else
    local target = (kind == 'si') and 1 or ((kind == 'sf') and 2 or 3)
    for slot = 1, 3 do
      if slot ~= target then chunks(keys, 1000, function(...) redis.call('HDEL', KEYS[base + slot], ...) end) end
    end
    local pairs_ = {}
    for i, k in ipairs(keys) do pairs_[#pairs_ + 1] = k; pairs_[#pairs_ + 1] = values[i] end
    chunks(pairs_, 2000, function(...) redis.call('HSET', KEYS[base + target], ...) end)
  end
end
for _, r in ipairs(p.rows) do
  if r[3] == '[]' then redis.call('HDEL', KEYS[11 + 5 * r[1]], r[2])
  else redis.call('HSET', KEYS[11 + 5 * r[1]], r[2], r[3]) end
end
chunks(p.labels, 1000, function(...) redis.call('SADD', KEYS[6], ...) end)
if p.plog then
  if p.replace then redis.call('DEL', plog) end
  redis.call('HSET', plog, p.batch, p.plog)
end
set_positions(KEYS[4], KEYS[5], fields, untl, metas)
init_positions(KEYS[4], KEYS[5], p.empty)
if p.drop and #p.drop > 0 then
  chunks(p.drop, 1000, function(...) redis.call('HDEL', KEYS[4], ...) end)
  chunks(p.drop, 1000, function(...) redis.call('HDEL', KEYS[5], ...) end)
end
if log_it then redis.call('ZADD', KEYS[7], p.batch, p.entry) end
if p.complete then redis.call('ZADD', KEYS[3], p.batch, p.batch) end
if p.whole then redis.call('SET', KEYS[#KEYS], p.epoch .. ':' .. p.batch)
elseif marker then redis.call('DEL', KEYS[#KEYS]) end
return {'applied'}
