"""RedisStore: positions and results in Redis, each write one Lua script (redis-py).

Key layout (version 2) — every key of one application starts with the hash tag ``{deo:<app_id>}``,
so they share one Redis Cluster hash slot and a script may touch all of them::

    {deo:<app>}:schema        string  layout version (SCHEMA_VERSION), set by the first write
    {deo:<app>}:epoch         string  newest epoch (INCR)
    {deo:<app>}:offsets       hash    position key ("topic/partition", "file:<id>") -> next position
    {deo:<app>}:pmeta         hash    position key -> JSON document of that position (absent: none)
    {deo:<app>}:batches       zset    offset log: score batch_id, member PlannedBatch JSON
    {deo:<app>}:commits       zset    commit log: score batch_id, member batch_id
    {deo:<app>}:labels        set     labels applied
    {deo:<app>}:heartbeat     string  the live driver's heartbeat (JSON document; epoch-checked writes)
    {deo:<app>}:flat          string  "<epoch>:<batch id>": the last batch committed whole under that
                                      epoch (the flat rule of ``_commit_rules.decide_flat``)
    {deo:<app>}:plog          hash    position log: batch id -> the positions that flat commit stored
                                      (one JSON entry, see ``_position_log``), applied over offsets/pmeta
    {deo:<app>}:vi:<ns>       hash    key -> int part of a value (HINCRBY)
    {deo:<app>}:vf:<ns>       hash    key -> float part of a value (HINCRBYFLOAT)
    {deo:<app>}:vj:<ns>       hash    key -> JSON document (non-numeric puts)
    {deo:<app>}:rows:<ns>     hash    "<batch_id>/<part>" -> JSON array of the rows (part "" = whole batch)
    {deo:<app>}:vb:<ns>       string  an upper bound of the magnitudes in vi:<ns> (kept by the commit
                                      script so that increments skip the per-key overflow check)

A value is the JSON document if there is one, else int part + float part (a float if a float
part exists, an int otherwise). Numbers are 64-bit as in Redis itself.

Layout version 2 is the same without ``plog``, its offset-log entries hold a JSON array of ranges
encoded one by one; layout version 1 is version 2 without ``pmeta`` (its offsets hash already holds
"topic/partition" keys). Both decode unchanged, so they are read as they are and upgraded by the
first write script, which sets ``schema`` to 3. Opening and reading never write; every write script
refuses a ``schema`` newer than this library's. The scripts are the ``lua/*.lua`` files shipped
with the package, each run after ``lua/common.lua`` (payload, layout and epoch checks, helpers).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from importlib import resources
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Sequence, Tuple, TypeVar

from ..._redaction import redact, redact_url
from ...core._ranges import Position, SourceRange
from ...errors import (
    ConfigurationError,
    DStreamExactlyOnceError,
    FencedError,
    StoreAuthError,
    StoreError,
    StoreUnavailableError,
    StoreVersionError,
)
from .. import _commit_rules as rules
from .. import _position_log as plog
from .. import _value_codec as codec
from .._base import SCHEMA_VERSION, CommitOutcome, PlannedBatch, TransactionalStore, Writes
from .._url import REDIS_OPTION_VALUES, StoreURL, check_option_values, check_options, float_option, parse_url
from ._retire import RedisRetireMixin
from ._wait import WRITTEN_STATUSES as _WRITTEN
from ._wait import in_doubt_error, script_then_wait, wait_options

__all__ = ["RedisStore"]

T = TypeVar("T")
#: Folds one write waits for before it gives up (each needs another writer to refill the position log)
_MAX_FOLDS = 10
_OPTIONS = ("connect_timeout", "timeout", "ssl_ca_certs", "ssl_cert_reqs", "wait_replicas", "wait_timeout")


def _load_scripts() -> Dict[str, Tuple[str, str]]:
    """``{name: (Lua text, SHA1)}`` of the write scripts in the package's ``lua`` folder."""
    folder = resources.files(__package__) / "lua"
    common = (folder / "common.lua").read_text(encoding="utf-8")
    scripts = {}
    for name in ("epoch", "log", "commit", "mark", "purge", "reset", "heartbeat", "fold", "retire"):
        text = common + (folder / f"{name}.lua").read_text(encoding="utf-8")
        scripts[name] = (text, hashlib.sha1(text.encode()).hexdigest())
    return scripts


_SCRIPTS = _load_scripts()


def _shown(ranges: Sequence[SourceRange], limit: int = 5) -> str:
    """The first ``limit`` of ``ranges`` as ``key [start, end)`` for a message."""
    text = ", ".join(f"{r.position_key} [{r.start}, {r.end})" for r in ranges[:limit])
    return text + (f" and {len(ranges) - limit} more" if len(ranges) > limit else "") if ranges else "no ranges"


#: Reads the flat marker, the position keys of the offsets hash and the position log's entries at one
#: instant (no write; same hash slot).
_KEYS_AT = "return {redis.call('GET', KEYS[1]), redis.call('HKEYS', KEYS[2]), redis.call('HVALS', KEYS[3])}"


class RedisStore(RedisRetireMixin, TransactionalStore):
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
    ``ssl_ca_certs`` (a readable file), ``ssl_cert_reqs`` (``none``, ``optional``, ``required``; both
    for ``rediss://`` only; every value is checked before connecting), and ``wait_replicas`` /
    ``wait_timeout``: after each write (all but heartbeats) ``WAIT wait_replicas wait_timeout`` on
    the same connection, and a write that fewer replicas confirmed raises
    :class:`StoreUnavailableError` (retriable) saying its outcome is in doubt, instead of being
    acknowledged (see ``docs/stores.md``).
    """

    scheme = "redis"
    _schemes: Tuple[str, ...] = ("redis", "rediss")

    def __init__(self, url: str, app_id: str) -> None:
        parsed = parse_url(url, default_host="127.0.0.1", multi_host=self._schemes[0] != "redis")
        if parsed.scheme not in self._schemes:
            raise ConfigurationError(f"{type(self).__name__} URLs start with {' or '.join(self._schemes)}://, "
                                     f"got {redact_url(url)!r}")
        options = parsed.options()
        check_options(url, options, _OPTIONS)
        check_option_values(url, options, REDIS_OPTION_VALUES)
        tls = [name for name in ("ssl_ca_certs", "ssl_cert_reqs") if name in options]
        if tls and not parsed.scheme.startswith("rediss"):
            raise ConfigurationError(f"store option(s) {', '.join(tls)} set TLS, which only a rediss:// URL uses "
                                     f"(rediss+cluster:// for a cluster), got {redact_url(url)!r}")
        db = parsed.path.strip("/") or "0"
        if not db.isdigit():
            raise ConfigurationError(f"Redis database must be a number, got {db!r} in {redact_url(url)!r}")
        self._wait = wait_options(url, options)
        super().__init__(url, app_id)
        self._params: Dict[str, Any] = {
            "username": parsed.username, "password": parsed.password, "ssl": parsed.scheme.startswith("rediss"),
            "decode_responses": True,
            "socket_connect_timeout": float_option(url, options, "connect_timeout", 5.0),
            "socket_timeout": float_option(url, options, "timeout", 30.0),
        }
        for name in ("ssl_ca_certs", "ssl_cert_reqs"):
            if name in options:
                self._params[name] = options[name]
        self._configure(parsed, int(db))
        self._prefix = "{deo:" + app_id + "}:"
        self._lock = threading.RLock()
        self._client_obj: Any = None
        self._flat = rules.FlatMemo()  # position keys known after this instance's last whole-batch commit
        self._pid = 0

    def _configure(self, parsed: StoreURL, db: int) -> None:
        """The server part of the URL: one host and a database number."""
        self._params.update(host=parsed.host, port=parsed.port or 6379, db=db)
        self._address = parsed.address(6379)

    # ---------------------------------------------------------------- connection + error boundary
    def _new_client(self) -> Any:
        import redis
        from redis.backoff import ExponentialBackoff
        from redis.retry import Retry

        return redis.Redis(retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), 2), **self._params)

    def _client(self) -> Any:
        if self._client_obj is None or self._pid != os.getpid():
            client = self._new_client()
            try:  # reachability, credentials and the layout version, without writing anything
                self._check_version(client.get(self._key("schema")) or 0)
            except BaseException:
                client.close()
                raise
            self._client_obj, self._pid = client, os.getpid()
        return self._client_obj

    def _check_version(self, found: Any) -> None:
        if int(found) > SCHEMA_VERSION:
            raise StoreVersionError(
                f"Redis store {self.display_url} app {self.app_id!r} has layout version {found}, newer "
                f"than version {SCHEMA_VERSION} written by this dstream-exactly-once; upgrade the library")

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
            except (rex.ConnectionError, rex.TimeoutError, rex.ReadOnlyError) as exc:
                raise StoreUnavailableError(f"Redis at {self._address} is unavailable: {self._scrub(exc)}") from exc
            except (rex.ClusterError, rex.TryAgainError, rex.AskError, rex.RedisClusterException) as exc:
                # a cluster that is down, a slot without a master or moving between masters:
                # retried like an outage (nothing was written: Redis refused the command)
                raise StoreUnavailableError(f"Redis Cluster at {self._address} is unavailable for app "
                                            f"{self.app_id!r} (slot moving or cluster down): "
                                            f"{type(exc).__name__}: {self._scrub(exc)}") from exc
            except rex.RedisError as exc:
                raise StoreError(f"Redis at {self._address}: {self._scrub(exc)}") from exc

    def _scrub(self, exc: BaseException) -> str:
        return redact(str(exc))  # parse_url registered the URL's passwords

    def _key(self, *parts: str) -> str:
        return self._prefix + ":".join(parts)

    def _run_script(self, name: str, keys: Sequence[str], payload: Dict[str, Any],
                    epoch: Optional[int] = None, what: str = "") -> List[str]:
        """Run a write script (``KEYS`` start with the schema and epoch keys); raises for a newer
        layout and, when ``epoch`` is given, for a fenced epoch. With ``wait_replicas`` (not for
        heartbeats) the write must be confirmed by that many replicas; ``what`` names it then."""
        import redis.exceptions as rex

        text, sha = _SCRIPTS[name]
        keys = [self._key("schema"), self._key("epoch"), *keys]
        arg = json.dumps({"schema": str(SCHEMA_VERSION), "epoch": str(epoch or 0), **payload}, separators=(",", ":"))

        def run(client: Any) -> List[str]:
            try:
                return list(client.evalsha(sha, len(keys), *keys, arg))
            except rex.NoScriptError:  # script cache is empty after a restart / failover
                return list(client.eval(text, len(keys), *keys, arg))

        def run_and_wait(client: Any) -> List[str]:
            status, acked, where = self._eval_and_wait(client, _SCRIPTS[name], keys, arg)
            if isinstance(status, Exception):
                raise status
            if acked < self._wait.replicas and status[0] in _WRITTEN:
                raise in_doubt_error(self.app_id, self._wait, where, what or f"{name} write", acked)
            return list(status)

        waits = self._wait.replicas > 0 and name != "heartbeat"
        status = self._call(run_and_wait if waits else run)
        if status[0] == "newer":
            self._check_version(status[1])
        if status[0] == "fenced" and epoch is not None:
            rules.check_epoch(self.app_id, int(status[1]), epoch)
            raise FencedError(f"app {self.app_id!r}: epoch {epoch} was rejected (current epoch {status[1]})")
        return status

    def _eval_and_wait(self, client: Any, script: Tuple[str, str], keys: List[str],
                       arg: str) -> Tuple[Any, int, str]:
        """``(script reply or its error, replicas that confirmed, server address)``: the script, a
        touch of the schema key and ``WAIT``, pipelined on one connection of ``client``."""
        return script_then_wait(client, script, keys, arg, self._wait) + (self._address,)

    def close(self) -> None:
        with self._lock:
            client, self._client_obj = self._client_obj, None
            if client is not None and self._pid == os.getpid():
                client.close()

    # ---------------------------------------------------------------- epochs and positions
    def start_epoch(self) -> int:
        return int(self._run_script("epoch", [], {}, what="new epoch")[1])

    def current_epoch(self) -> int:
        return int(self._call(lambda c: c.get(self._key("epoch"))) or 0)

    def load_positions(self) -> Dict[str, Position]:
        def read(client: Any) -> List[Dict[str, str]]:
            pipe = client.pipeline(transaction=True)  # MULTI: one consistent snapshot of the three hashes
            pipe.hgetall(self._key("offsets"))
            pipe.hgetall(self._key("pmeta"))
            pipe.hgetall(self._key("plog"))
            return list(pipe.execute())

        offsets, metas, entries = self._call(read)
        positions = dict(rules.stored_position(self.app_id, k, v, metas.get(k)) for k, v in offsets.items())
        if not entries:
            return positions
        merged = plog.merge(self.app_id, (entries[f] for f in sorted(entries, key=int)))
        return plog.apply(self.app_id, positions, merged)

    def _fold(self) -> None:
        """Fold the position log into the offsets and pmeta hashes (see ``stores._position_log``): read and
        merged here, written by one script if the log still holds what was read."""
        for _ in range(10):
            entries = self._call(lambda c: c.hgetall(self._key("plog")))
            if not entries:
                return
            fields = sorted(entries, key=int)
            merged = plog.merge(self.app_id, (entries[f] for f in fields))
            sets = merged.set_pos
            payload = {"fields": fields,
                       "sets": [list(sets), list(map(str, sets.values())), [merged.set_doc.get(k, "") for k in sets]],
                       "inits": [[k, str(p), d or ""] for k, p, d in plog.rows_of(merged.init_pos, merged.init_doc)]}
            keys = [self._key("offsets"), self._key("pmeta"), self._key("plog")]
            if self._run_script("fold", keys, payload, what="fold of the position log")[0] == "applied":
                return
        raise StoreError(f"app {self.app_id!r}: the position log kept changing while it was folded; try again")

    def _reset_positions(self, epoch: int, positions: Dict[str, int], documents: Dict[str, str]) -> None:
        payload = {"keys": list(positions), "values": [str(v) for v in positions.values()],
                   "docs": [documents.get(k, "") for k in positions]}
        keys = [self._key("offsets"), self._key("pmeta"), self._key("flat"), self._key("plog")]
        self._run_folded("reset", keys, payload, epoch, "reset of positions")

    def _run_folded(self, name: str, keys: Sequence[str], payload: Dict[str, Any], epoch: int,
                    what: str) -> List[str]:
        """:meth:`_run_script` of a script that reads or writes the offsets hash: it refuses (``fold``)
        while the position log holds entries, which are then folded, and it runs again."""
        for _ in range(_MAX_FOLDS):
            status = self._run_script(name, keys, payload, epoch, what)
            if status[0] != "fold":
                return status
            self._fold()
        raise StoreError(f"app {self.app_id!r}: the position log kept filling while the {what} waited for its "
                         f"fold; nothing was written")

    # ---------------------------------------------------------------- offset log / commit log
    def _log_batch(self, epoch: int, batch: PlannedBatch) -> None:
        status = self._run_script("log", [self._key("batches")],
                                  {"batch": str(batch.batch_id), "entry": batch.to_json()}, epoch,
                                  f"offset-log entry of batch {batch.batch_id} ({_shown(batch.ranges)})")
        if status[0] == "exists" and PlannedBatch.from_json(status[1]) != batch:
            raise rules.logged_conflict_error(batch, PlannedBatch.from_json(status[1]))

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

    def _purge_logs(self, epoch: int, keep: int) -> int:
        status = self._run_script("purge", [self._key("commits"), self._key("batches")], {"keep": str(keep)}, epoch)
        return int(status[1])

    # ---------------------------------------------------------------- the transaction
    def _check_writes(self, writes: Writes) -> None:
        if writes.statements:
            raise ConfigurationError("Writes.execute() runs SQL, which a Redis store cannot; use incr/put/"
                                     "put_batch_rows, or a sqlite:// or postgresql:// store")

    def _commit(self, plan: rules.CommitPlan) -> CommitOutcome:
        memo, expected = self._flat, (plan.epoch, plan.batch.batch_id - 1)
        known = memo.known_before(expected) if plan.whole else None
        # a flat commit after this instance's own last one: its positions go to the position log
        into_log = plan.whole and memo.marker == expected and not plan.writes.dropped_positions
        try:
            outcome = self._commit_once(plan, known, into_log)
            if outcome is None:  # the marker moved since this instance's last commit: every empty range goes
                memo.marker, memo.keys = None, None
                return self._commit(plan)
            if outcome is CommitOutcome.APPLIED and plan.whole:
                memo.marker, memo.keys = memo.after(plan, known)
                if memo.keys is None and (plan.empty or not into_log):  # learn which keys are stored
                    memo.keys = self._keys_at(memo.marker)
            elif outcome is CommitOutcome.APPLIED:
                memo.marker, memo.keys = None, None
            return outcome
        except BaseException:
            memo.marker, memo.keys = None, None
            raise

    def _keys_at(self, marker: Tuple[int, int]) -> Optional[FrozenSet[str]]:
        """The stored position keys (of the offsets hash and of the position log's entries), if the marker
        still names ``marker`` (all read by one script)."""
        flat, keys, entries = self._call(lambda c: c.eval(_KEYS_AT, 3, self._key("flat"), self._key("offsets"),
                                                          self._key("plog")))
        if rules.parse_flat_marker(flat) != marker:
            return None
        merged = plog.merge(self.app_id, entries)
        return frozenset(k.decode() if isinstance(k, bytes) else str(k) for k in keys).union(merged.set_pos,
                                                                                              merged.init_pos)

    def _commit_once(self, plan: rules.CommitPlan, known: Optional[FrozenSet[str]],
                     into_log: bool = False, folds: int = 0) -> Optional[CommitOutcome]:
        """One run of the commit script (again after a fold of the position log); ``known``: the position
        keys stored after the batch before, if this instance knows them (the empty ranges of those keys
        are left out of the payload); ``into_log``: the positions go to the position log, if the flat rule
        applies. ``None``: the store's marker is not the one ``known`` or ``into_log`` expected; nothing
        was written."""
        batch, writes, todo = plan.batch, plan.writes, plan.todo
        empty = plan.empty if known is None else [r for r in plan.empty if r.position_key not in known]
        groups, largest = self._value_groups(writes)
        namespaces = list(dict.fromkeys([ns for ns, _ in groups] + list(writes.batch_rows)))
        index = {ns: i for i, ns in enumerate(namespaces)}
        keys = [self._key("commits"), self._key("offsets"), self._key("pmeta"), self._key("labels"),
                self._key("batches")]
        for ns in namespaces:
            keys += [self._key("vi", ns), self._key("vf", ns), self._key("vj", ns), self._key("rows", ns),
                     self._key("vb", ns)]
        keys += [self._key("plog"), self._key("flat")]  # position log, flat marker: last, wherever namespaces end
        metas = plan.metas
        payload = {
            "batch": str(batch.batch_id), "complete": plan.complete_batch, "whole": plan.whole,
            "prev": str(batch.batch_id - 1),
            "ranges": [[], [], [], []] if into_log else [
                [r.position_key for r in todo], [str(r.start) for r in todo], [str(r.end) for r in todo],
                [metas.get(r.position_key, "") for r in todo]],
            "empty": [] if into_log else [[r.position_key, str(r.end), metas.get(r.position_key, "")] for r in empty],
            "groups": [[index[ns], kind, keys_, texts] + ([largest[ns]] if kind == "ai" else [])
                       for (ns, kind), (keys_, texts) in groups.items()],
            "rows": [[index[ns], f"{batch.batch_id}/{plan.part}", "[" + ",".join(rows) + "]"]
                     for ns, rows in writes.batch_rows.items()],
            "labels": list(dict.fromkeys(writes.labels)),
            "drop": list(writes.dropped_positions),
        }
        if into_log:
            payload.update(plog=plog.entry_text(plan), fold_at=plog.FOLD_AT,
                           replace=plog.supersedes(plan, known))  # known: checked by the script (p.known)
        if plan.log_entry:
            payload["entry"] = batch.to_json()
        if known is not None:
            payload["known"] = rules.flat_marker(plan.epoch, batch.batch_id - 1)
        status = self._run_script("commit", keys, payload, plan.epoch,
                                  f"commit of batch {batch.batch_id} ({_shown(todo)})")
        if status[0] == "replayed":
            return CommitOutcome.REPLAYED
        if status[0] == "logged":
            existing = PlannedBatch.from_json(status[1])
            if existing != batch:
                raise rules.logged_conflict_error(batch, existing)
            # the same entry, encoded otherwise
            return self._commit_once(plan._replace(log_entry=False), known, into_log)
        if status[0] == "fold":
            if folds >= _MAX_FOLDS:
                raise StoreError(f"app {self.app_id!r}: the position log kept filling while the commit of batch "
                                 f"{batch.batch_id} waited for its fold; nothing was written")
            self._fold()
            return self._commit_once(plan, known, into_log, folds + 1)
        if status[0] == "stale":
            return None
        if status[0] == "gap":
            rules.decide_flat(self.app_id, batch.batch_id, plan.epoch, (plan.epoch, int(status[1])))
        if status[0] == "conflict":
            r = next(r for r in todo if r.position_key == status[1])
            raise rules.conflict_error(batch.batch_id, r, status[2])
        if status[0] == "mixed":
            raise rules.mixed_error(batch.batch_id, json.loads(status[1]), json.loads(status[2]), batch.ranges)
        if status[0] in ("notnumber", "overflow"):
            what = "holds a non-numeric value" if status[0] == "notnumber" else "would leave the 64-bit range"
            bad = [f"{ns}/{status[1]}" for (ns, kind), (keys_, _) in groups.items()
                   if kind[0] == "a" and status[1] in keys_]
            raise StoreError(f"cannot increment {', '.join(bad)}: it {what}; nothing was written")
        return CommitOutcome.APPLIED

    @staticmethod
    def _value_groups(writes: Writes) -> Tuple[Dict[Tuple[str, str], Tuple[List[str], List[str]]], Dict[str, str]]:
        """Value writes grouped by ``(namespace, kind)`` (see ``lua/commit.lua``): ``(keys, values as Redis
        text)``; and the largest magnitude of each namespace's int increments (the commit script's
        overflow bound grows by it)."""
        groups: Dict[Tuple[str, str], Tuple[List[str], List[str]]] = {}
        if not writes.puts:  # counters: the common case, without building ValueOps
            ints, floats = codec.split_increments(writes)
            largest: Dict[str, str] = {}
            for ns, amounts in ints.items():
                groups[(ns, "ai")] = (list(amounts), list(map(int.__repr__, amounts.values())))
                largest[ns] = str(max(max(amounts.values()), -min(amounts.values())))
            for ns, key, amount in floats:
                keys, texts = groups.setdefault((ns, "af"), ([], []))
                keys.append(key)
                texts.append(float.__repr__(amount))
            return groups, largest
        magnitudes: Dict[str, int] = {}
        for op in codec.value_ops(writes):
            kind = ("a" if op.op == "add" else "s") + op.kind
            keys, texts = groups.setdefault((op.namespace, kind), ([], []))
            keys.append(op.key)
            texts.append(op.value if op.kind == "j" else
                         float.__repr__(op.value) if op.kind == "f" else int.__repr__(op.value))
            if kind == "ai":
                magnitudes[op.namespace] = max(magnitudes.get(op.namespace, 0), abs(op.value))
        return groups, {ns: str(m) for ns, m in magnitudes.items()}

    def _mark_committed(self, epoch: int, batch: PlannedBatch, todo: List[SourceRange],
                        drop: Sequence[str] = ()) -> CommitOutcome:
        payload = {"batch": str(batch.batch_id), "ranges": [[r.position_key, str(r.end)] for r in todo],
                   "drop": list(drop)}
        status = self._run_folded("mark", [self._key("commits"), self._key("offsets"), self._key("pmeta"),
                                           self._key("flat"), self._key("plog")], payload,
                                  epoch, f"commit-log entry of batch {batch.batch_id} ({_shown(todo)})")
        if status[0] == "uncommitted":
            r = next(r for r in todo if r.position_key == status[1])
            raise rules.uncommitted_error(batch.batch_id, r, status[2])
        return CommitOutcome.REPLAYED if status[0] == "replayed" else CommitOutcome.APPLIED

    # ---------------------------------------------------------------- operators: liveness, apps
    def _heartbeat(self, epoch: int, doc_json: str) -> None:
        self._run_script("heartbeat", [self._key("heartbeat")], {"doc": doc_json}, epoch)

    def load_heartbeat(self) -> Optional[Dict[str, Any]]:
        raw = self._call(lambda c: c.get(self._key("heartbeat")))
        doc = json.loads(raw) if raw else None
        return doc if isinstance(doc, dict) else None

    def list_apps(self) -> List[str]:
        """Apps found by ``SCAN`` over ``{deo:*}:epoch`` keys of this database (on a Redis Cluster,
        redis-py's ``RedisCluster`` scans every master)."""
        def scan(client: Any) -> List[str]:
            return [str(k) for k in client.scan_iter(match="{deo:*}:epoch", count=1000)]

        keys = self._call(scan)
        return sorted({k[len("{deo:"):-len("}:epoch")] for k in keys})

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
        return {k: codec.decode_value(ints.get(k), floats.get(k), docs.get(k))
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
