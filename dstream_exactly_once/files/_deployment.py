"""Where a file stream's files are: the deployment options both forms of the file source share.

``FileUtils`` (DStreams) and the Structured Streaming ``aof`` source read the same two options,
given in the options mapping (``<name>`` or ``spark.aof.<name>``, which wins over the conf) or as
Spark conf ``spark.aof.<name>``:

=====================  ========  ================================================================
name                   default   meaning
=====================  ========  ================================================================
``shared.filesystem``  false     every executor sees the files at the same paths (NFS, a shared
                                 volume): a master other than local mode may run the stream
``hosts``              (none)    ``h1,h2``: the files are node-local on these hosts, planned and read
                                 on each host (``FileUtils`` only; see :mod:`._hosts`)
=====================  ========  ================================================================

A master other than local mode (``local``, ``local[N]``, ``local-cluster[…]``) may run tasks on
other hosts than the driver's, so it is refused unless one of them says where the files are
(:func:`check_master`). These are a form's options, not the source's: each form takes them out
(:func:`take_option`) before :class:`~._options.FileSourceOptions` checks the rest. Nothing here
imports Spark.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Optional, Tuple

from ..core._options import Option, table
from ..errors import ConfigurationError
from ._options import CONF_PREFIX

__all__ = ["DEPLOYMENT_OPTIONS", "HOSTS", "SHARED_FILESYSTEM", "check_master", "is_local_master",
           "take_option", "take_shared_filesystem"]

#: ``true`` declares that every executor sees the same files at the same paths.
SHARED_FILESYSTEM = "shared.filesystem"

#: ``h1,h2``: the files are node-local on these hosts (named as Spark names their executors).
HOSTS = "hosts"

#: the deployment options (the module docstring is their reference)
DEPLOYMENT_OPTIONS = table(
    Option(SHARED_FILESYSTEM, "bool", False, "every executor sees the same files at the same paths"),
    Option(HOSTS, "str", None, "h1,h2: node-local files on these hosts"),
)

_LOCAL_MASTER = re.compile(r"local(\[[^\]]*\])?|local-cluster\[[^\]]*\]")


def is_local_master(master: str) -> bool:
    """Whether Spark master ``master`` runs every task on the driver's host (local mode)."""
    return _LOCAL_MASTER.fullmatch(master) is not None


def take_option(options: Dict[Any, Any], conf: Dict[Any, Any], name: str) -> Optional[Tuple[Any, str]]:
    """Remove option ``name`` from ``options`` (as ``name`` or ``spark.aof.<name>``) and ``conf`` (as
    ``spark.aof.<name>``) and return its value with where it was given (``option 'hosts'``, ``Spark conf
    'spark.aof.hosts'``): the options over the conf, ``spark.aof.<name>`` over ``name``; ``None`` when unset."""
    found: Optional[Tuple[Any, str]] = None
    key = CONF_PREFIX + name
    if key in conf:
        found = (conf.pop(key), f"Spark conf {key!r}")
    for given in (name, key):
        if given in options:
            found = (options.pop(given), f"option {given!r}")
    return found


def take_shared_filesystem(options: Dict[Any, Any], conf: Dict[Any, Any]) -> bool:
    """Remove ``shared.filesystem`` from ``options`` and ``conf`` (see :func:`take_option`) and return
    its value (default false); anything but true/false is refused, naming where it was given."""
    found = take_option(options, conf, SHARED_FILESYSTEM)
    return False if found is None else bool(DEPLOYMENT_OPTIONS[SHARED_FILESYSTEM].parse(found[0], found[1]))


def check_master(master: str, declared: bool, *, node_local: bool) -> None:
    """Refuse a multi-host ``master`` unless the deployment is ``declared`` (``shared.filesystem``, or
    ``hosts`` where the form reads node-local files: ``node_local``): otherwise a task on another host
    would not see the files the driver planned."""
    if declared or is_local_master(master):
        return
    head = f"master {master!r} may run tasks on other hosts than the driver's, which plans the files"
    shared = (f"option {SHARED_FILESYSTEM!r}=true if every executor sees the same files at the same paths (NFS, "
              f"a shared volume; Spark conf {CONF_PREFIX + SHARED_FILESYSTEM!r})")
    if node_local:
        raise ConfigurationError(
            f"{head}. Say where the files are: option {HOSTS!r}='host1,host2' (node-local files on those hosts, "
            f"planned and read on each host; Spark conf {CONF_PREFIX + HOSTS!r}), or {shared}")
    raise ConfigurationError(
        f"{head}: set {shared}; node-local files cannot be read by the aof source (Spark's Python Data "
        f"Source API cannot pin a partition to a host)")
