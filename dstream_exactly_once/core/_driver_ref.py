"""Driver-only objects that survive Spark's checkpoint serialization.

With ``ssc.checkpoint(dir)`` Spark pickles every DStream function into the checkpoint. Our batch
builders hold the SparkContext, a broker client and the store, none of which can be pickled. They
pickle as a token instead: in the driver process that wrote it, the token resolves to the live
object; in a process recovering from the checkpoint it resolves to a stub that explains what to
do — the offsets live in the store, so a new StreamingContext (not ``getOrCreate``) is the way to
resume an exactly-once stream (plain ``createDirectStream`` streams pickle as a recipe instead and
do recover under ``getOrCreate``).
"""

from __future__ import annotations

import threading
import uuid
from typing import Any, Dict

from ..errors import ConfigurationError

_LIVE: Dict[str, Any] = {}
_LOCK = threading.Lock()


class _RecoveredStub:
    def __init__(self, kind: str) -> None:
        self.kind = kind

    def __getattr__(self, name: str) -> Any:
        raise ConfigurationError(
            f"a {self.kind} cannot be recovered from a Spark checkpoint: its offsets live in the store. "
            "Create a new StreamingContext and stream (StreamingContext.getOrCreate recovers only plain "
            "createDirectStream streams); the "
            "stream resumes from the store's committed offsets and replays uncommitted batches")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.__getattr__("__call__")


def _resolve(token: str, kind: str) -> Any:
    with _LOCK:
        obj = _LIVE.get(token)
    return obj if obj is not None else _RecoveredStub(kind)


class DriverOnly:
    """Mixin: pickles as a process-local token (see the module docstring)."""

    _driver_token: str

    def _register(self) -> None:
        self._driver_token = uuid.uuid4().hex
        with _LOCK:
            _LIVE[self._driver_token] = self

    def __reduce__(self) -> Any:
        return (_resolve, (self._driver_token, type(self).__name__))
