"""Which ``spark-sql-kafka-0-10_2.13`` to put in ``spark.jars.packages`` for B1(c).

The exact version of the installed PySpark is used when Maven Central has it (and its
``spark-token-provider-kafka-0-10_2.13`` dependency). When it does not (a PySpark newer than the
connectors published, or a partial mirror), the newest published release of the same major
version not newer than PySpark is used instead, and the token-provider dependency — when that
exact version is missing too — is excluded from the Ivy resolution and added as the newest
published release not newer than the connector (``spark.jars``). Such a fallback is reported in
the results as "not exact". Two small HTTP requests per artifact (a POM HEAD and its
``maven-metadata.xml``), nothing more; the chosen jars are cached in
``~/.cache/dstream-exactly-once/ivy``.
"""

from __future__ import annotations

import os
import re
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional

from .common import log

CENTRAL = "https://repo1.maven.org/maven2"
GROUP = "org.apache.spark"
CONNECTOR = "spark-sql-kafka-0-10_2.13"
TOKEN = "spark-token-provider-kafka-0-10_2.13"
CACHE = Path(os.environ.get("DEO_CACHE_DIR", Path.home() / ".cache" / "dstream-exactly-once"))


@dataclass
class Connector:
    packages: Optional[str]
    label: str
    exact: bool
    excludes: str = ""
    jars: List[str] = field(default_factory=list)
    ivy_dir: str = str(CACHE / "ivy")
    problem: str = ""


def _url(artifact: str, version: str, ext: str = "pom") -> str:
    return f"{CENTRAL}/{GROUP.replace('.', '/')}/{artifact}/{version}/{artifact}-{version}.{ext}"


def _exists(url: str) -> bool:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=20) as r:
            return bool(r.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _versions(artifact: str) -> List[str]:
    url = f"{CENTRAL}/{GROUP.replace('.', '/')}/{artifact}/maven-metadata.xml"
    with urllib.request.urlopen(url, timeout=20) as r:
        text = r.read().decode()
    return re.findall(r"<version>([^<]+)</version>", text)


def _key(v: str) -> tuple:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


def _newest(versions: List[str], limit: str, major: int) -> Optional[str]:
    releases = [v for v in versions if re.fullmatch(r"\d+\.\d+\.\d+", v) and _key(v)[0] == major
                and _key(v) <= _key(limit)]
    return max(releases, key=_key) if releases else None


def _download(artifact: str, version: str) -> str:
    dest = CACHE / "bench-jars" / f"{artifact}-{version}.jar"
    if not dest.exists():
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_suffix(".tmp")
        with urllib.request.urlopen(_url(artifact, version, "jar"), timeout=120) as r:
            tmp.write_bytes(r.read())
        tmp.replace(dest)
    return str(dest)


def resolve_connector(_workdir: str = "") -> Connector:
    import pyspark

    version = re.sub(r"(\.dev\d*|rc\d*)$", "", pyspark.__version__)
    coord = f"{GROUP}:{CONNECTOR}:{version}"
    try:
        if _exists(_url(CONNECTOR, version)) and _exists(_url(TOKEN, version)):
            return Connector(coord, f"{CONNECTOR}:{version} (exact PySpark version)", True)
        major = _key(version)[0]
        chosen = _newest(_versions(CONNECTOR), version, major)
        if chosen is None:
            return Connector(None, f"{CONNECTOR}:{version}", False,
                             problem=f"Maven Central has no {CONNECTOR} release {major}.x <= {version}")
        label = f"{CONNECTOR}:{chosen} on PySpark {version} (NOT exact: {version} is not on Maven Central)"
        if chosen == version:
            label = f"{CONNECTOR}:{chosen}"
        if _exists(_url(TOKEN, chosen)):
            return Connector(f"{GROUP}:{CONNECTOR}:{chosen}", label, False)
        token = _newest(_versions(TOKEN), chosen, major)
        if token is None:
            return Connector(None, label, False, problem=f"Maven Central has no {TOKEN} release {major}.x <= {chosen}")
        log(f"B1(c) {CONNECTOR}:{version} is not on Maven Central; using {chosen} with {TOKEN}:{token}")
        return Connector(f"{GROUP}:{CONNECTOR}:{chosen}", f"{label}, with {TOKEN}:{token}", False,
                         excludes=f"{GROUP}:{TOKEN}", jars=[_download(TOKEN, token)])
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return Connector(None, coord, False, problem=f"cannot reach Maven Central to resolve {coord}: {exc}")
