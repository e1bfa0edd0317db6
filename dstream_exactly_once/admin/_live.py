"""The refusal every operator action makes while the application's driver is live."""

from __future__ import annotations

from typing import Any, Mapping

from ..errors import DriverLiveError

__all__ = ["refuse_while_live"]


def refuse_while_live(driver: Mapping[str, Any], force: bool, action: str, forced: str) -> None:
    """Raise :class:`DriverLiveError` (``refusing to <action>: a driver is live …``) when ``driver`` (the
    :func:`~dstream_exactly_once.engine._heartbeat.driver_status`) is live and not ``force``; ``forced`` names
    the forced action in the way out."""
    if driver["live"] and not force:
        doc = driver["heartbeat"] or {}
        raise DriverLiveError(
            f"refusing to {action}: a driver is live (host {doc.get('host')}, pid {doc.get('pid')}, epoch "
            f"{doc.get('epoch')}, heartbeat {driver['age_s']:.0f}s ago); stop it first or force {forced} (--force); "
            f"nothing was written")
