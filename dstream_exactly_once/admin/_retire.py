"""Retiring an application: deleting everything a store holds of one app id, as one fenced action.

An application that will not run again leaves its state in the store: the epoch record, positions
(and the position log), the offset log and commit log, values per namespace, batch rows, labels,
the heartbeat and incident records. :func:`retire_app` removes all of it:

1. **checks, writing nothing**: the app has something stored (an app id with nothing stored — a
   typo, another store — is refused, naming the apps the store holds) and — when executing — no
   driver of the app is live (fresh heartbeat with the current epoch) unless forced;
2. a **dry run** (the default) returns the inventory: what would be deleted, per kind and
   namespace, with counts;
3. **executing** takes a new epoch (a driver still running is fenced) and then deletes every row or
   key of the app in ONE store transaction (one script on Redis), checked against that epoch; the
   inventory returned is what that transaction deleted.

Afterwards the app has no epoch at all: a driver of it that is still running (a zombie) is refused by
the epoch check of its next commit, log entry or heartbeat and writes nothing. Nothing of any other
app is read or written. The app id can be used again: a new start begins with no positions, as
a first start does.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any, Dict, List, Optional, Tuple, Union

from ..engine._heartbeat import driver_status
from ..errors import ConfigurationError
from ..stores._base import TransactionalStore
from ._live import refuse_while_live

__all__ = ["RetirePlan", "retire_app"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetirePlan:
    """What :func:`retire_app` found and deleted (``executed``) or would delete (a dry run).

    ``items`` are the inventory rows (:meth:`~dstream_exactly_once.stores.AppRetirement.app_inventory`):
    ``kind``, ``namespace`` (values and batch rows; else ``None``) and ``count``. ``driver`` is the
    app's driver status before the action; ``epoch`` the epoch the deletion was fenced with.
    """

    app_id: str
    store: str
    items: Tuple[Dict[str, Any], ...]
    driver: Dict[str, Any]
    executed: bool = False
    epoch: Optional[int] = None

    @property
    def total(self) -> int:
        """How many entries in all (the sum of the counts)."""
        return sum(int(i["count"]) for i in self.items)

    def to_dict(self) -> Dict[str, Any]:
        """The plan as a JSON-ready dict (``dstream-eo retire --json``)."""
        return {"app": self.app_id, "store": self.store, "dry_run": not self.executed, "epoch": self.epoch,
                "driver": self.driver, "items": [dict(i) for i in self.items], "total": self.total}


def retire_app(store_or_url: Union[TransactionalStore, str], app_id: str, *, execute: bool = False,
               force: bool = False) -> RetirePlan:
    """Delete everything stored of application ``app_id`` (a dry run unless ``execute``).

    ``store_or_url`` is a store URL (opened and closed again) or an open
    :class:`~dstream_exactly_once.stores.TransactionalStore` of ``app_id``. Without ``execute``
    nothing is written and the returned :class:`RetirePlan` lists what would be deleted. With
    ``execute``: refused with :class:`DriverLiveError` while a driver of the app is live unless
    ``force``; then a new epoch is taken and everything of the app is deleted in one transaction.
    An app with nothing stored is refused with :class:`ConfigurationError`. Every refusal happens
    before anything is written and takes no epoch.
    """
    for name, value in (("execute", execute), ("force", force)):
        if not isinstance(value, bool):
            raise ConfigurationError(f"{name} must be a bool, got {value!r}")
    if isinstance(store_or_url, TransactionalStore):
        if store_or_url.app_id != app_id:
            raise ConfigurationError(f"app_id {app_id!r} does not match the store's app {store_or_url.app_id!r}")
        return _retire(store_or_url, execute, force)
    if not isinstance(store_or_url, str):
        raise ConfigurationError(f"store_or_url must be a store URL or a TransactionalStore, got {store_or_url!r}")
    from ..stores import open_store

    with open_store(store_or_url, app_id) as store:
        return _retire(store, execute, force)


def _nothing_stored(store: TransactionalStore) -> ConfigurationError:
    apps: List[str] = [a for a in store.list_apps() if a != store.app_id]
    return ConfigurationError(f"app {store.app_id!r} has nothing stored in {store.display_url} (wrong app id or "
                              f"store?); apps there: {', '.join(apps) if apps else '(none)'}; nothing was written")


def _retire(store: TransactionalStore, execute: bool, force: bool) -> RetirePlan:
    items = store.app_inventory()
    if not items:
        raise _nothing_stored(store)
    driver = driver_status(store)
    plan = RetirePlan(store.app_id, store.display_url, tuple(items), driver)
    if not execute:
        return plan
    refuse_while_live(driver, force, f"retire app {store.app_id!r}", "the retirement")
    epoch = store.start_epoch()
    deleted = store.delete_app(epoch)
    plan = replace(plan, items=tuple(deleted), executed=True, epoch=epoch)
    log.warning("retired app %r of %s with epoch %d: deleted %s", store.app_id, plan.store, epoch,
                ", ".join(f"{i['kind']}{'' if i['namespace'] is None else ' ' + i['namespace']}: {i['count']}"
                          for i in deleted))
    return plan
