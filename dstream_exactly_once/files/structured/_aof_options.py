"""Options of the Structured Streaming ``aof`` source, checked before the query starts.

The file source's options (:mod:`dstream_exactly_once.files._options`: ``starting.offsets``,
``bytes.max``, ``md5.check.enabled``, ``path.syntax``, ``fail.on.data.loss`` …) apply unchanged, also
as Spark conf ``spark.aof.<name>``; ``.option()`` wins over the conf. The ``aof`` source adds:

==============================  ========  =========================================================
name                            default   meaning
==============================  ========  =========================================================
``path``                        (needed)  the files, as for ``FileUtils`` (``.load(path)`` sets it)
``max.bytes.per.trigger``       (none)    most bytes of one micro-batch over all files: whole file
                                          ranges (each at most ``bytes.max``) in planning order, at
                                          least one per batch
``include.file.id``             false     a column ``file_id``: the file identity (``file:<id>``)
``starting.positions.store``    (none)    a store URL holding committed file positions (a DStream
                                          file app's, or the ``deo-store`` sink's with ``anchor=true``)
``starting.positions.app``      (none)    that app's id; a new query continues after its positions
``shared.filesystem``           false     every executor sees the files at the same paths (needed for
                                          a master other than local mode; as for ``FileUtils``:
                                          :mod:`dstream_exactly_once.files._deployment`)
==============================  ========  =========================================================

``hosts`` (node-local files) is refused: Spark's Python Data Source API cannot pin a partition to a
host. Nothing here imports Spark.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Tuple

from ...core._options import parse_bool
from ...errors import ConfigurationError
from ...structured._starting_positions import POSITIONS_APP, POSITIONS_STORE, check_starting_positions
from .._deployment import HOSTS, SHARED_FILESYSTEM, check_master, take_option
from .._options import CONF_PREFIX, FileSourceOptions

__all__ = ["AofOptions", "parse_aof_options"]

MAX_BYTES_PER_TRIGGER = "max.bytes.per.trigger"
INCLUDE_FILE_ID = "include.file.id"
_OWN = (MAX_BYTES_PER_TRIGGER, INCLUDE_FILE_ID, POSITIONS_STORE, POSITIONS_APP, SHARED_FILESYSTEM, HOSTS, "path")


@dataclass(frozen=True)
class AofOptions:
    """The validated options of one ``aof`` query (picklable; the store URL is never shown in a repr)."""

    path: str
    source: FileSourceOptions
    max_bytes_per_trigger: Optional[int] = None
    include_file_id: bool = False
    positions_store: Optional[str] = field(default=None, repr=False)
    positions_app: Optional[str] = None


def parse_aof_options(options: Mapping[str, Any], conf: Optional[Mapping[str, Any]] = None,
                      master: Optional[str] = None) -> AofOptions:
    """The ``aof`` options from ``.option()`` values over Spark conf ``spark.aof.<name>``; ``master`` (the
    Spark master, when known) is checked against ``shared.filesystem``. Raises
    :class:`~dstream_exactly_once.errors.ConfigurationError` naming the key, the value and what is allowed."""
    source = dict(options)
    source_conf = {k: v for k, v in (conf or {}).items() if isinstance(k, str) and k.startswith(CONF_PREFIX)}
    own: Dict[str, Tuple[Any, str]] = {}  # name: (value, where it was given)
    for name in _OWN:
        found = take_option(source, source_conf, name)
        if found is not None:
            own[name] = found
    if HOSTS in own:
        value, where = own[HOSTS]
        raise ConfigurationError(
            f"{where}={value!r} (node-local files) is not supported by the aof Structured Streaming source: "
            f"Spark's Python Data Source API cannot pin a partition to a host, so a range could be read on "
            f"a host that does not have the file. Read node-local files with FileUtils (DStreams, option "
            f"'hosts'), or put them on a filesystem every executor sees and set {SHARED_FILESYSTEM}=true")
    path = own.get("path", (None, ""))[0]
    if not isinstance(path, str) or not path.startswith("/"):
        raise ConfigurationError(f"option 'path' must be an absolute glob or /dir/<regex> naming the files "
                                 f"(.load('/var/log/app/service.log*')), got {path!r}")
    shared = _bool(own, SHARED_FILESYSTEM)
    if master is not None:
        check_master(master, shared, node_local=False)
    cap: Optional[int] = None
    if MAX_BYTES_PER_TRIGGER in own:
        raw, where = own[MAX_BYTES_PER_TRIGGER]
        text = raw.strip() if isinstance(raw, str) else raw
        value = int(text) if isinstance(text, str) and re.fullmatch(r"\d+", text) else text
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigurationError(f"{where} must be a positive integer (bytes), got {raw!r}")
        cap = value
    include_id = _bool(own, INCLUDE_FILE_ID)
    store = own.get(POSITIONS_STORE, (None, ""))[0]
    app = own.get(POSITIONS_APP, (None, ""))[0]
    store, app = check_starting_positions(store, app, "aof source")
    also = [name for name in _OWN if name != HOSTS]  # hosts: refused above
    return AofOptions(path, FileSourceOptions.from_mapping(source, source_conf, also=also), cap, include_id, store,
                      app)


def _bool(own: Mapping[str, Tuple[Any, str]], name: str) -> bool:
    """Option ``name`` of ``own`` (value, where it was given) as true/false; false when unset."""
    if name not in own:
        return False
    value, where = own[name]
    return parse_bool(where, value)
