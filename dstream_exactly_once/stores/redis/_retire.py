"""Retiring an application of a Redis store: its inventory, and deleting all of its keys in one script.

Every key of an application starts with its hash tag ``{deo:<app_id>}`` (the key layout of
:mod:`.redis`), so its keys are found by one ``SCAN`` pattern (on a Redis Cluster, redis-py scans
every master; the keys all live on the master of the tag's slot) and deleted by one script that
declares them all, after the same epoch check as every write. The caller takes a new epoch first
(:func:`~dstream_exactly_once.admin.retire_app`): every driver of the app is then fenced,
so no key appears between the scan and the script, and a driver that started in between makes the
script refuse (its epoch moved).
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from .._interfaces import inventory_row, sorted_inventory

__all__ = ["RedisRetireMixin"]

#: Keys of one value each, by their name after the app's prefix: the inventory kind.
_SINGLE = {"schema": "layout", "epoch": "epoch", "heartbeat": "heartbeat", "flat": "commit marker"}
#: Collections by name: (inventory kind, the command that counts their entries).
_COLLECTIONS = {"offsets": ("positions", "hlen"), "pmeta": ("position documents", "hlen"),
                "plog": ("position log", "hlen"), "batches": ("offset log", "zcard"),
                "commits": ("commit log", "zcard"), "labels": ("labels", "scard")}
#: Every key name the store writes outside the per-namespace keys (always part of the deletion).
_FIXED = tuple(_SINGLE) + tuple(_COLLECTIONS)


class RedisRetireMixin:
    """``app_inventory``, ``_delete_app`` and ``newest_entry_layout`` (what the store holds of the app)
    for :class:`~dstream_exactly_once.stores.RedisStore`."""

    app_id: str
    _prefix: str

    # provided by RedisStore
    _call: Any
    _key: Any
    _run_script: Any

    def newest_entry_layout(self) -> Optional[int]:
        """See :meth:`~dstream_exactly_once.stores.BatchLog.newest_entry_layout`."""
        found = self._call(lambda c: c.zrange(self._key("batches"), -1, -1))
        if not found:
            return None
        return 2 if isinstance(json.loads(found[0]).get("ranges"), list) else 3

    def _app_keys(self) -> List[str]:
        """Every key under the app's prefix (app ids hold no glob characters)."""
        def scan(client: Any) -> List[str]:
            return sorted({str(k) for k in client.scan_iter(match=self._prefix + "*", count=1000)})

        return list(self._call(scan))

    def _inventory_of(self, keys: Sequence[str]) -> List[Dict[str, Any]]:
        """The inventory of ``keys`` (all of the app's): one count per kind, values per namespace."""
        rows: List[Dict[str, Any]] = []
        counted: List[Tuple[str, Optional[str], str, str]] = []  # (kind, namespace, command, key)
        values: Dict[str, List[str]] = {}
        for key in keys:
            name = key[len(self._prefix):]
            part, _, ns = name.partition(":")
            if name in _SINGLE:
                rows.append(inventory_row(_SINGLE[name], None, 1))
            elif name in _COLLECTIONS:
                kind, command = _COLLECTIONS[name]
                counted.append((kind, None, command, key))
            elif ns and part in ("vi", "vf", "vj"):
                values.setdefault(ns, []).append(key)
            elif ns and part == "rows":
                counted.append(("batch rows", ns, "hlen", key))
            elif ns and part == "vb":
                rows.append(inventory_row("value bounds", ns, 1))
            else:
                rows.append(inventory_row("other", name, 1))

        def read(client: Any) -> List[Any]:
            pipe = client.pipeline(transaction=False)
            for _, _, command, key in counted:
                getattr(pipe, command)(key)
            for ns in values:
                for key in values[ns]:
                    pipe.hkeys(key)
            return list(pipe.execute())

        replies = self._call(read) if counted or values else []
        for (what, namespace, _, _), n in zip(counted, replies, strict=False):
            rows.append(inventory_row(what, namespace, int(n)))
        fields = iter(replies[len(counted):])
        for ns, ns_keys in values.items():
            seen: Set[str] = set()
            for _ in ns_keys:
                seen.update(str(f) for f in next(fields))
            rows.append(inventory_row("values", ns, len(seen)))
        return sorted_inventory(rows)

    def app_inventory(self) -> List[Dict[str, Any]]:
        return self._inventory_of(self._app_keys())

    def _delete_app(self, epoch: int) -> List[Dict[str, Any]]:
        keys = self._app_keys()
        deleted = self._inventory_of(keys)
        fixed = {self._key(name) for name in _FIXED}
        others = sorted((set(keys) | fixed) - {self._key("schema"), self._key("epoch")})
        self._run_script("retire", others, {}, epoch, f"deletion of app {self.app_id!r}")
        return deleted
