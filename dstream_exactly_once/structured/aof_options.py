"""Options of the Structured Streaming ``aof`` source, checked before the query starts.

The file source's options (:mod:`dstream_exactly_once.files.options`: ``starting.offsets``,
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
                                          a master other than local mode)
==============================  ========  =========================================================

``hosts`` (node-local files) is refused: Spark's Python Data Source API cannot pin a partition to a
host. Nothing here imports Spark.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional

from ..errors import ConfigurationError
from ..files.options import CONF_PREFIX, FileSourceOptions
from ..stores.app_id import check_app_id
from ..stores.url import redact_url, url_scheme

__all__ = ["AofOptions", "parse_aof_options"]

MAX_BYTES_PER_TRIGGER = "max.bytes.per.trigger"
INCLUDE_FILE_ID = "include.file.id"
POSITIONS_STORE = "starting.positions.store"
POSITIONS_APP = "starting.positions.app"
SHARED_FILESYSTEM = "shared.filesystem"
HOSTS = "hosts"
_OWN = (MAX_BYTES_PER_TRIGGER, INCLUDE_FILE_ID, POSITIONS_STORE, POSITIONS_APP, SHARED_FILESYSTEM, HOSTS, "path")
_STORE_SCHEMES = ("postgres", "postgresql", "redis", "rediss", "sqlite")
_LOCAL_MASTER = re.compile(r"local(\[[^\]]*\])?|local-cluster\[[^\]]*\]")


@dataclass(frozen=True)
class AofOptions:
    """The validated options of one ``aof`` query (picklable; the store URL is never shown in a repr)."""

    path: str
    source: FileSourceOptions
    max_bytes_per_trigger: Optional[int] = None
    include_file_id: bool = False
    positions_store: Optional[str] = field(default=None, repr=False)
    positions_app: Optional[str] = None


def _bool(name: str, value: Any) -> bool:
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    if isinstance(value, bool):
        return value
    raise ConfigurationError(f"option {name!r} must be true or false, got {value!r}")


def parse_aof_options(options: Mapping[str, Any], conf: Optional[Mapping[str, Any]] = None,
                      master: Optional[str] = None) -> AofOptions:
    """The ``aof`` options from ``.option()`` values over Spark conf ``spark.aof.<name>``; ``master`` (the
    Spark master, when known) is checked against ``shared.filesystem``. Raises
    :class:`~dstream_exactly_once.errors.ConfigurationError` naming the key, the value and what is allowed."""
    own: Dict[str, Any] = {}
    source: Dict[str, Any] = {}
    for key, value in (conf or {}).items():
        if isinstance(key, str) and key.startswith(CONF_PREFIX) and key[len(CONF_PREFIX):] in _OWN:
            own[key[len(CONF_PREFIX):]] = (value, f"Spark conf {key!r}")
    source_conf = {k: v for k, v in (conf or {}).items()
                   if isinstance(k, str) and k.startswith(CONF_PREFIX) and k[len(CONF_PREFIX):] not in _OWN}
    for key, value in options.items():
        name = key[len(CONF_PREFIX):] if key.startswith(CONF_PREFIX) else key
        if name in _OWN:
            own[name] = (value, f"option {key!r}")
        else:
            source[name] = value
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
    shared = _bool(SHARED_FILESYSTEM, own[SHARED_FILESYSTEM][0]) if SHARED_FILESYSTEM in own else False
    if master is not None and not shared and not _LOCAL_MASTER.fullmatch(master):
        raise ConfigurationError(
            f"master {master!r} may run tasks on other hosts than the driver's, which plans the files: set "
            f"option {SHARED_FILESYSTEM!r}=true if every executor sees the same files at the same paths (NFS, "
            f"a shared volume); node-local files cannot be read by the aof source (Spark's Python Data "
            f"Source API cannot pin a partition to a host)")
    cap: Optional[int] = None
    if MAX_BYTES_PER_TRIGGER in own:
        raw, where = own[MAX_BYTES_PER_TRIGGER]
        text = raw.strip() if isinstance(raw, str) else raw
        value = int(text) if isinstance(text, str) and re.fullmatch(r"\d+", text) else text
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigurationError(f"{where} must be a positive integer (bytes), got {raw!r}")
        cap = value
    include_id = _bool(INCLUDE_FILE_ID, own[INCLUDE_FILE_ID][0]) if INCLUDE_FILE_ID in own else False
    store = own.get(POSITIONS_STORE, (None, ""))[0]
    app = own.get(POSITIONS_APP, (None, ""))[0]
    if (store is None) != (app is None):
        missing = POSITIONS_APP if app is None else POSITIONS_STORE
        raise ConfigurationError(f"options {POSITIONS_STORE!r} and {POSITIONS_APP!r} go together (the store "
                                 f"URL and the DStream app's id); {missing!r} is missing")
    if store is not None:
        if not isinstance(store, str) or url_scheme(store) not in _STORE_SCHEMES:
            shown = redact_url(store) if isinstance(store, str) else store
            raise ConfigurationError(f"option {POSITIONS_STORE!r} must be a store URL ({', '.join(_STORE_SCHEMES)}"
                                     f"://…), got {shown!r}")
        try:
            check_app_id(app)
        except ConfigurationError as exc:
            raise ConfigurationError(f"option {POSITIONS_APP!r}: {exc}") from None
    also = [name for name in _OWN if name != HOSTS]  # hosts: refused above
    return AofOptions(path, FileSourceOptions.from_mapping(source, source_conf, also=also), cap, include_id, store,
                      app)
