"""Classpaths of Maven Central jars for the JVM test services (Kafka broker, YARN mini-cluster).

Nothing is built: ``mvn dependency:build-classpath`` on a small pom in ``jvm/`` downloads the jars
into the local repository (``~/.m2``) once and writes their classpath to a file, which is cached
under ``$DEO_CACHE_DIR`` (default ``~/.cache/dstream-exactly-once``) keyed by the pom's digest and
the properties passed to Maven.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import Mapping, Optional

from ..errors import ServiceError

CLASSPATH_CACHE = Path(os.environ.get("DEO_CACHE_DIR", Path.home() / ".cache" / "dstream-exactly-once"))


def maven_classpath(pom: Path, name: str, properties: Optional[Mapping[str, str]] = None) -> str:
    """The classpath of ``pom``'s dependencies, resolving them with Maven on first use (cached).

    ``name`` labels the cache file and the error message (``"kafka"``, ``"hadoop-minicluster"``);
    ``properties`` are passed as ``-Dkey=value`` (e.g. the Hadoop version) and are part of the key.
    """
    props = dict(properties or {})
    digest = hashlib.sha256(pom.read_bytes() + repr(sorted(props.items())).encode()).hexdigest()[:12]
    cp_file = CLASSPATH_CACHE / f"{name}-{digest}.classpath"
    if cp_file.exists():
        cp = cp_file.read_text().strip()
        if cp and all(Path(p).exists() for p in cp.split(os.pathsep)):
            return cp
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ServiceError(f"Maven ('mvn') is needed to resolve the {name} jars; install it "
                           "(the Debian package 'maven')")
    cp_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = cp_file.with_suffix(".tmp")
    proc = subprocess.run(
        [mvn, "-q", "-B", "-f", str(pom), "dependency:build-classpath", f"-Dmdep.outputFile={tmp}",
         *(f"-D{k}={v}" for k, v in sorted(props.items()))],
        capture_output=True, text=True,
    )
    if proc.returncode != 0 or not tmp.exists():
        raise ServiceError(f"Maven could not resolve the {name} jars from {pom}:\n"
                           f"{proc.stdout[-3000:]}{proc.stderr[-2000:]}")
    tmp.replace(cp_file)
    return cp_file.read_text().strip()
