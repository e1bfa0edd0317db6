"""RedisStore: offsets and results in Redis, each commit one Lua script (redis-py).

Key layout — every key of one application starts with the hash tag ``{deo:<app_id>}``, so they
share one Redis Cluster hash slot and a script may touch all of them::

    {deo:<app>}:schema        string  layout version (SCHEMA_VERSION)
    {deo:<app>}:epoch         string  newest epoch (INCR)
    {deo:<app>}:offsets       hash    "topic/partition" -> next offset to read
    {deo:<app>}:batches       zset    offset log: score batch_id, member PlannedBatch JSON
    {deo:<app>}:commits       zset    commit log: score batch_id, member batch_id
    {deo:<app>}:labels        set     labels applied
    {deo:<app>}:vi:<ns>       hash    key -> int part of a value (HINCRBY)
    {deo:<app>}:vf:<ns>       hash    key -> float part of a value (HINCRBYFLOAT)
    {deo:<app>}:vj:<ns>       hash    key -> JSON document (non-numeric puts)
    {deo:<app>}:rows:<ns>     hash    "<batch_id>/<part>" -> JSON array of the rows (part "" = whole batch)

A value is the JSON document if there is one, else int part + float part (a float if a float
part exists, an int otherwise). Numbers are 64-bit as in Redis itself.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, TypeVar

from ..errors import (
    ConfigurationError,
    DStreamExactlyOnceError,
    FencedError,
    OffsetConflictError,
    StoreAuthError,
    StoreError,
    StoreUnavailableError,
    StoreVersionError,
)
from ..offsets import OffsetRange, TopicAndPartition
from . import _plan
from .base import SCHEMA_VERSION, CommitOutcome, PlannedBatch, TransactionalStore, Writes
from .url import check_options, float_option, parse_url, redact_url

__all__ = ["RedisStore"]

T = TypeVar("T")
_OPTIONS = ("connect_timeout", "timeout", "ssl_ca_certs", "ssl_cert_reqs")

# Epoch check shared by the scripts: returns {'fenced', stored} unless ARGV epoch is current.
_EPOCH = """
local stored = redis.call('GET', KEYS[1]) or '0'
if stored ~= p.epoch then return {'fenced', stored} end
"""

# Variadic commands over long lists, in chunks (Lua's unpack() has a stack limit).
_HELPERS = """
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
"""

# KEYS: epoch, commits, offsets, labels, then per namespace i (0-based): vi, vf, vj, rows at 5+4i..8+4i.
# p.ranges = {fields, from offsets, until offsets}; p.groups = {{namespace index, kind, keys, values}} with
# kind "ai"/"af" (increment an int/float) or "si"/"sf"/"sj" (set an int/float/JSON document).
# Everything is validated before the first write (a Lua script is not rolled back on error), with one
# HMGET per hash rather than one call per key.
_COMMIT = "local p = cjson.decode(ARGV[1])" + _EPOCH + _HELPERS + """
if redis.call('ZSCORE', KEYS[2], p.batch) then return {'replayed'} end
local fields, from, untl = p.ranges[1], p.ranges[2], p.ranges[3]
local applied, done = {}, {}
local stored = hmget(KEYS[3], fields)
for i, cur in ipairs(stored) do
  if cur == false or cur == from[i] then applied[#applied + 1] = fields[i]
  elseif cur == untl[i] then done[#done + 1] = fields[i]
  else return {'conflict', fields[i], cur} end
end
if #done > 0 then
  if #applied == 0 then return {'replayed'} end
  return {'mixed', cjson.encode(applied), cjson.encode(done)}
end
for _, g in ipairs(p.groups) do
  local base, kind, keys, values = 4 + 4 * g[1], g[2], g[3], g[4]
  if kind == 'ai' or kind == 'af' then
    if redis.call('HLEN', KEYS[base + 3]) > 0 then  -- only namespaces holding JSON documents need the check
      for i, doc in ipairs(hmget(KEYS[base + 3], keys)) do
        if doc then return {'notnumber', keys[i]} end
      end
    end
    local olds = hmget(KEYS[base + ((kind == 'ai') and 1 or 2)], keys)
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
for _, g in ipairs(p.groups) do
  local base, kind, keys, values = 4 + 4 * g[1], g[2], g[3], g[4]
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
  if r[3] == '[]' then redis.call('HDEL', KEYS[8 + 4 * r[1]], r[2])
  else redis.call('HSET', KEYS[8 + 4 * r[1]], r[2], r[3]) end
end
chunks(p.labels, 1000, function(...) redis.call('SADD', KEYS[4], ...) end)
local offsets = {}
for i, f in ipairs(fields) do offsets[#offsets + 1] = f; offsets[#offsets + 1] = untl[i] end
chunks(offsets, 2000, function(...) redis.call('HSET', KEYS[3], ...) end)
for _, r in ipairs(p.empty) do redis.call('HSETNX', KEYS[3], r[1], r[2]) end
if p.complete then redis.call('ZADD', KEYS[2], p.batch, p.batch) end
return {'applied'}
"""

# KEYS: epoch, commits, offsets. Every non-empty range must be at its untilOffset.
_MARK = "local p = cjson.decode(ARGV[1])" + _EPOCH + """
if redis.call('ZSCORE', KEYS[2], p.batch) then return {'replayed'} end
for _, r in ipairs(p.ranges) do
  local cur = redis.call('HGET', KEYS[3], r[1])
  if cur ~= r[2] then return {'uncommitted', r[1], cur or ''} end
end
redis.call('ZADD', KEYS[2], p.batch, p.batch)
return {'applied'}
"""

# KEYS: epoch, batches. Logs the batch unless an entry with its id exists (returned for comparison).
_LOG = "local p = cjson.decode(ARGV[1])" + _EPOCH + """
local existing = redis.call('ZRANGEBYSCORE', KEYS[2], p.batch, p.batch)
if #existing > 0 then return {'exists', existing[1]} end
redis.call('ZADD', KEYS[2], p.batch, p.entry)
return {'applied'}
"""

# KEYS: epoch, commits, batches. Drops committed batches with id < last committed - keep + 1.
_PURGE = "local p = cjson.decode(ARGV[1])" + _EPOCH + """
local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
if #last == 0 then return {'purged', '0'} end
local below = tonumber(last[2]) - tonumber(p.keep) + 1
if below <= 0 then return {'purged', '0'} end
local dropped = 0
local entries = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', '(' .. below, 'WITHSCORES')
for i = 1, #entries, 2 do
  if redis.call('ZSCORE', KEYS[2], entries[i + 1]) then
    redis.call('ZREM', KEYS[3], entries[i])
    dropped = dropped + 1
  end
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. below)
return {'purged', tostring(dropped)}
"""

_SCRIPTS = {name: (text, hashlib.sha1(text.encode()).hexdigest())
            for name, text in (("commit", _COMMIT), ("mark", _MARK), ("log", _LOG), ("purge", _PURGE))}


class RedisStore(TransactionalStore):
    """Offsets and results of one application in Redis keys under ``{deo:<app_id>}``.

    Unit of atomicity: one :meth:`commit` — a single Lua script (``EVALSHA``, falling back to
    ``EVAL``) that checks the epoch, the commit log and every offset before it writes anything,
    then writes results, new offsets and the commit-log entry. Redis runs a script without
    interleaving other commands, so a commit is all-or-nothing for other clients.

    Delivery guarantee: exactly-once for everything written through :meth:`commit`. Durability is
    Redis's: with ``appendonly yes`` and ``appendfsync always`` an acknowledged commit survives a
    crash; with weaker settings a crash can lose the last commits *together with* their offsets, so
    those batches are re-read and re-applied once (still exactly-once in the surviving state).
    A commit retried after a dropped connection may find its first attempt applied: it then
    reports REPLAYED and writes nothing.

    URL: ``redis://[user:password@]host[:port][/db]`` or ``rediss://`` (TLS); options
    ``connect_timeout`` (default 5 s), ``timeout`` (socket timeout, default 30 s),
    ``ssl_ca_certs``, ``ssl_cert_reqs``.
    """

    scheme = "redis"

    def __init__(self, url: str, app_id: str) -> None:
        parsed = parse_url(url, default_host="127.0.0.1")
        if parsed.scheme not in ("redis", "rediss"):
            raise ConfigurationError(f"Redis store URLs start with redis:// or rediss://, got {redact_url(url)!r}")
        options = parsed.options()
        check_options(url, options, _OPTIONS)
        db = parsed.path.strip("/") or "0"
        if not db.isdigit():
            raise ConfigurationError(f"Redis database must be a number, got {db!r} in {redact_url(url)!r}")
        super().__init__(url, app_id)
        self._params: Dict[str, Any] = {
            "host": parsed.host, "port": parsed.port or 6379, "db": int(db), "username": parsed.username,
            "password": parsed.password, "ssl": parsed.scheme == "rediss", "decode_responses": True,
            "socket_connect_timeout": float_option(url, options, "connect_timeout", 5.0),
            "socket_timeout": float_option(url, options, "timeout", 30.0),
        }
        for name in ("ssl_ca_certs", "ssl_cert_reqs"):
            if name in options:
                self._params[name] = options[name]
        self._address = parsed.address(6379)
        self._prefix = "{deo:" + app_id + "}:"
        self._lock = threading.RLock()
        self._client_obj: Any = None
        self._pid = 0

    # ---------------------------------------------------------------- connection + error boundary
    def _client(self) -> Any:
        if self._client_obj is None or self._pid != os.getpid():
            import redis
            from redis.backoff import ExponentialBackoff
            from redis.retry import Retry

            client = redis.Redis(retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), 2), **self._params)
            client.set(self._key("schema"), SCHEMA_VERSION, nx=True)
            found = int(client.get(self._key("schema")) or SCHEMA_VERSION)
            if found > SCHEMA_VERSION:
                client.close()
                raise StoreVersionError(
                    f"Redis store {redact_url(self.url)} app {self.app_id!r} has layout version {found}, newer "
                    f"than version {SCHEMA_VERSION} written by this dstream-exactly-once; upgrade the library")
            self._client_obj, self._pid = client, os.getpid()
        return self._client_obj

    def _call(self, fn: Callable[[Any], T]) -> T:
        """Run ``fn(client)``; the only place redis-py exceptions are translated."""
        try:
            import redis.exceptions as rex
        except ImportError as exc:
            raise ConfigurationError("RedisStore needs redis-py: pip install redis") from exc
        with self._lock:
            try:
                return fn(self._client())
            except DStreamExactlyOnceError:
                raise
            except (rex.AuthenticationError, rex.NoPermissionError) as exc:
                raise StoreAuthError(f"Redis at {self._address} refused the credentials: {self._scrub(exc)}") from exc
            except (rex.ConnectionError, rex.TimeoutError) as exc:
                raise StoreUnavailableError(f"Redis at {self._address} is unavailable: {self._scrub(exc)}") from exc
            except rex.RedisError as exc:
                raise StoreError(f"Redis at {self._address}: {self._scrub(exc)}") from exc

    def _scrub(self, exc: BaseException) -> str:
        text = str(exc)
        secret = self._params.get("password")
        return text.replace(secret, "***") if secret else text

    def _key(self, *parts: str) -> str:
        return self._prefix + ":".join(parts)

    def _run_script(self, name: str, keys: Sequence[str], payload: Dict[str, Any]) -> List[str]:
        import redis.exceptions as rex

        text, sha = _SCRIPTS[name]
        arg = json.dumps(payload, separators=(",", ":"))

        def run(client: Any) -> List[str]:
            try:
                return list(client.evalsha(sha, len(keys), *keys, arg))
            except rex.NoScriptError:  # script cache is empty after a restart / failover
                return list(client.eval(text, len(keys), *keys, arg))

        return self._call(run)

    def close(self) -> None:
        with self._lock:
            client, self._client_obj = self._client_obj, None
            if client is not None and self._pid == os.getpid():
                client.close()

    # ---------------------------------------------------------------- epochs and offsets
    def start_epoch(self) -> int:
        return int(self._call(lambda c: c.incr(self._key("epoch"))))

    def current_epoch(self) -> int:
        return int(self._call(lambda c: c.get(self._key("epoch"))) or 0)

    def _fenced(self, status: List[str], epoch: int) -> None:
        if status[0] == "fenced":
            _plan.check_epoch(self.app_id, int(status[1]), epoch)
            raise FencedError(f"app {self.app_id!r}: epoch {epoch} was rejected (current epoch {status[1]})")

    def load_offsets(self) -> Dict[TopicAndPartition, int]:
        raw = self._call(lambda c: c.hgetall(self._key("offsets")))
        return {_plan.parse_tp_field(f): int(v) for f, v in raw.items()}

    # ---------------------------------------------------------------- offset log / commit log
    def log_batch(self, epoch: int, batch: PlannedBatch) -> None:
        epoch, batch = _plan.check_epoch_arg(epoch), _plan.check_batch_arg(batch)
        _plan.commit_ranges(batch, None)
        status = self._run_script("log", [self._key("epoch"), self._key("batches")],
                                  {"epoch": str(epoch), "batch": str(batch.batch_id), "entry": batch.to_json()})
        self._fenced(status, epoch)
        if status[0] == "exists" and PlannedBatch.from_json(status[1]) != batch:
            raise OffsetConflictError(f"batch {batch.batch_id} is already in the offset log as "
                                      f"{PlannedBatch.from_json(status[1])}; refusing to log it again as {batch}")

    def get_batch(self, batch_id: int) -> Optional[PlannedBatch]:
        found = self._call(lambda c: c.zrangebyscore(self._key("batches"), batch_id, batch_id))
        return PlannedBatch.from_json(found[0]) if found else None

    def _last(self, name: str) -> Optional[int]:
        found = self._call(lambda c: c.zrange(self._key(name), -1, -1, withscores=True))
        return int(found[0][1]) if found else None

    def last_logged_batch_id(self) -> Optional[int]:
        return self._last("batches")

    def last_committed_batch_id(self) -> Optional[int]:
        return self._last("commits")

    def is_committed(self, batch_id: int) -> bool:
        return self._call(lambda c: c.zscore(self._key("commits"), str(batch_id))) is not None

    def purge_logs(self, epoch: int, keep: int) -> int:
        epoch, keep = _plan.check_epoch_arg(epoch), _plan.check_keep_arg(keep)
        status = self._run_script("purge", [self._key("epoch"), self._key("commits"), self._key("batches")],
                                  {"epoch": str(epoch), "keep": str(keep)})
        self._fenced(status, epoch)
        return int(status[1])

    # ---------------------------------------------------------------- the transaction
    def commit(
        self,
        epoch: int,
        batch: PlannedBatch,
        writes: Writes,
        *,
        ranges: Optional[Sequence[OffsetRange]] = None,
        complete_batch: bool = True,
    ) -> CommitOutcome:
        epoch, batch = _plan.check_epoch_arg(epoch), _plan.check_batch_arg(batch)
        if not isinstance(writes, Writes):
            raise ConfigurationError(f"writes must be a Writes, got {writes!r}")
        if writes.statements:
            raise ConfigurationError("Writes.execute() runs SQL, which a Redis store cannot; use incr/put/"
                                     "put_batch_rows, or a sqlite:// or postgresql:// store")
        todo, empty = _plan.commit_ranges(batch, ranges)
        groups = self._value_groups(writes)
        part = _plan.part_name(todo + empty, complete_batch)
        namespaces = list(dict.fromkeys([ns for ns, _ in groups] + list(writes.batch_rows)))
        index = {ns: i for i, ns in enumerate(namespaces)}
        keys = [self._key("epoch"), self._key("commits"), self._key("offsets"), self._key("labels")]
        for ns in namespaces:
            keys += [self._key("vi", ns), self._key("vf", ns), self._key("vj", ns), self._key("rows", ns)]
        payload = {
            "epoch": str(epoch), "batch": str(batch.batch_id), "complete": bool(complete_batch),
            "ranges": [[_plan.tp_field(r) for r in todo], [str(r.fromOffset) for r in todo],
                       [str(r.untilOffset) for r in todo]],
            "empty": [[_plan.tp_field(r), str(r.untilOffset)] for r in empty],
            "groups": [[index[ns], kind, keys_, texts] for (ns, kind), (keys_, texts) in groups.items()],
            "rows": [[index[ns], f"{batch.batch_id}/{part}", "[" + ",".join(rows) + "]"]
                     for ns, rows in writes.batch_rows.items()],
            "labels": list(dict.fromkeys(writes.labels)),
        }
        status = self._run_script("commit", keys, payload)
        self._fenced(status, epoch)
        if status[0] == "replayed":
            return CommitOutcome.REPLAYED
        if status[0] == "conflict":
            r = next(r for r in todo if _plan.tp_field(r) == status[1])
            raise _plan.conflict_error(batch.batch_id, r, status[2])
        if status[0] == "mixed":
            raise _plan.mixed_error(batch.batch_id, json.loads(status[1]), json.loads(status[2]))
        if status[0] in ("notnumber", "overflow"):
            what = "holds a non-numeric value" if status[0] == "notnumber" else "would leave the 64-bit range"
            bad = [f"{ns}/{status[1]}" for (ns, kind), (keys_, _) in groups.items()
                   if kind[0] == "a" and status[1] in keys_]
            raise StoreError(f"cannot increment {', '.join(bad)}: it {what}; nothing was written")
        return CommitOutcome.APPLIED

    @staticmethod
    def _value_groups(writes: Writes) -> Dict[Tuple[str, str], Tuple[List[str], List[str]]]:
        """Value writes grouped by ``(namespace, kind)`` (see ``_COMMIT``): ``(keys, values as Redis text)``."""
        groups: Dict[Tuple[str, str], Tuple[List[str], List[str]]] = {}
        if not writes.puts:  # counters: the common case, without building ValueOps
            ints, floats = _plan.split_increments(writes)
            for ns, amounts in ints.items():
                groups[(ns, "ai")] = (list(amounts), list(map(int.__repr__, amounts.values())))
            for ns, key, amount in floats:
                keys, texts = groups.setdefault((ns, "af"), ([], []))
                keys.append(key)
                texts.append(float.__repr__(amount))
            return groups
        for op in _plan.value_ops(writes):
            keys, texts = groups.setdefault((op.namespace, ("a" if op.op == "add" else "s") + op.kind), ([], []))
            keys.append(op.key)
            texts.append(op.value if op.kind == "j" else
                         float.__repr__(op.value) if op.kind == "f" else int.__repr__(op.value))
        return groups

    def mark_committed(self, epoch: int, batch: PlannedBatch) -> CommitOutcome:
        epoch, batch = _plan.check_epoch_arg(epoch), _plan.check_batch_arg(batch)
        todo, _ = _plan.commit_ranges(batch, None)
        payload = {"epoch": str(epoch), "batch": str(batch.batch_id),
                   "ranges": [[_plan.tp_field(r), str(r.untilOffset)] for r in todo]}
        status = self._run_script("mark", [self._key("epoch"), self._key("commits"), self._key("offsets")], payload)
        self._fenced(status, epoch)
        if status[0] == "uncommitted":
            r = next(r for r in todo if _plan.tp_field(r) == status[1])
            raise _plan.uncommitted_error(batch.batch_id, r, status[2])
        return CommitOutcome.REPLAYED if status[0] == "replayed" else CommitOutcome.APPLIED

    # ---------------------------------------------------------------- reading results
    def _values(self, namespace: str, key: Optional[str]) -> Dict[str, Any]:
        def read(client: Any) -> List[Dict[str, str]]:
            pipe = client.pipeline(transaction=True)  # MULTI: one consistent snapshot of the three hashes
            for kind in ("vi", "vf", "vj"):
                if key is None:
                    pipe.hgetall(self._key(kind, namespace))
                else:
                    pipe.hmget(self._key(kind, namespace), [key])
            res = pipe.execute()
            return res if key is None else [{key: v[0]} if v[0] is not None else {} for v in res]

        ints, floats, docs = self._call(read)
        return {k: _plan.decode_value(ints.get(k), floats.get(k), docs.get(k))
                for k in sorted(set(ints) | set(floats) | set(docs))}

    def get_value(self, namespace: str, key: str) -> Any:
        return self._values(namespace, key).get(key)

    def get_values(self, namespace: str) -> Dict[str, Any]:
        return self._values(namespace, None)

    def get_batch_rows(self, namespace: str) -> Dict[int, List[Any]]:
        raw = self._call(lambda c: c.hgetall(self._key("rows", namespace)))
        out: Dict[int, List[Any]] = {}
        for field in sorted(raw, key=lambda f: (int(f.partition("/")[0]), f.partition("/")[2])):
            out.setdefault(int(field.partition("/")[0]), []).extend(json.loads(raw[field]))
        return out

    def has_label(self, label: str) -> bool:
        return bool(self._call(lambda c: c.sismember(self._key("labels"), label)))
