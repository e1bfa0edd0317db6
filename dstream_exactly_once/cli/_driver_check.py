"""The app's driver as the commands see it: a one-line description, and the refusal while it is live."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Mapping

from ..engine._heartbeat import driver_status
from ..errors import CliError
from ._exit_codes import EXIT_REFUSED

if TYPE_CHECKING:
    from ..stores._interfaces import HeartbeatStore

__all__ = ["describe_driver", "driver_status", "refuse_if_live"]


def describe_driver(status: Mapping[str, Any]) -> str:
    """One line on the driver of :func:`driver_status`: LIVE, DEAD (its host is this host and its process
    is gone) or not live; epoch, host, pid, last batch and the heartbeat's age."""
    doc = status["heartbeat"]
    if not doc:
        return f"driver: no heartbeat (epoch {status['epoch']})"
    if status.get("dead"):
        state = f"DEAD (pid {doc.get('pid')} is not running on this host)"
    else:
        state = "LIVE" if status["live"] else "not live"
    age = status["age_s"]
    return (f"driver: {state} - epoch {doc.get('epoch')} (store epoch {status['epoch']}), host {doc.get('host')}, "
            f"pid {doc.get('pid')}, last batch {doc.get('last_batch')}, heartbeat "
            f"{'-' if age is None else f'{age:.0f}s'} ago")


def refuse_if_live(store: HeartbeatStore, force: bool, what: str) -> Dict[str, Any]:
    """The driver's status; raises :class:`CliError` (exit status 3) when it is live and not ``force``."""
    status = driver_status(store)
    if status["live"] and not force:
        doc = status["heartbeat"]
        raise CliError(f"refusing to {what}: a driver of app {store.app_id!r} is live (host {doc.get('host')}, pid "
                       f"{doc.get('pid')}, epoch {doc.get('epoch')}, heartbeat {status['age_s']:.0f}s ago); stop it "
                       f"first or pass --force", EXIT_REFUSED)
    return status
