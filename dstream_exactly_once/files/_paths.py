"""Which files a path pattern names: an absolute glob, or a regular expression over file names.

- ``glob`` (default): the whole absolute path, Python :mod:`glob` syntax (``/var/log/app/service.log.*``;
  wildcards may appear in directories too).
- ``regex``: ``/literal/directory/<regex>``; the regular expression (everything after the last ``/``)
  must match a file's whole *name* in that directory (``/var/log/app/service\\.log(\\.\\d+)?``).

Only regular files count; ``exclude`` globs (against the name or the whole path) and
``exclude.regex`` (searched in the whole path) remove files. Wildcards follow :mod:`glob`: they do
not match a name starting with ``.`` unless the pattern's part starts with ``.`` too.

A scan never fails and never drops a matched entry silently: :meth:`PathPattern.scan_report` lists
the files it can read and, beside them, every matched entry it cannot read with the reason (a file
or directory without permission, a FIFO, socket or device, a symbolic link to nothing). File names
that are not valid UTF-8 are kept as Python keeps them (``surrogateescape``) and read like any other.

A scan stats every matched file (one ``stat`` call each: a directory listing tells nothing about
growth) and opens only the files it has not seen unchanged: given the previous scan's files
(``known``), a file whose look is vouched for (:func:`~._identity.unchanged_since`) keeps the gzip
flag read from its magic bytes then.
"""

from __future__ import annotations

import errno
import fnmatch
import glob
import os
import re
import stat as stat_mod
import time
from dataclasses import dataclass
from typing import List, Mapping, Optional, Pattern, Tuple

from ..errors import ConfigurationError
from ._identity import GZIP_MAGIC, FileStat, file_stat
from ._options import FileSourceOptions

__all__ = ["PathPattern", "Unreadable"]

#: ``(path, reason)``: a matched entry a scan cannot read.
Unreadable = Tuple[str, str]

_GONE = (errno.ENOENT, errno.ENOTDIR)  # vanished between listing and use: a rotation, not a problem


@dataclass(frozen=True)
class PathPattern:
    """A validated path pattern and its exclusions; :meth:`scan` lists the files it names now."""

    path: str
    syntax: str = "glob"
    exclude: Tuple[str, ...] = ()
    exclude_regex: Optional[str] = None

    def __post_init__(self) -> None:
        if not isinstance(self.path, str) or not os.path.isabs(self.path):
            raise ConfigurationError(f"path must be an absolute glob or regular expression (as a str), "
                                     f"got {self.path!r}")
        if "\0" in self.path:
            raise ConfigurationError(f"path {self.path!r} holds a NUL byte; no file name can contain one: "
                                     f"give an absolute glob or regular expression without it")
        if self.syntax != "regex" and self.path.endswith("/"):
            raise ConfigurationError(f"path {self.path!r} ends with '/': it must name files, not a directory "
                                     f"(e.g. {self.path + '*'!r} for every file in it)")
        if self.syntax == "regex":
            directory, name = self.path.rsplit("/", 1)
            if not name:
                raise ConfigurationError(f"path {self.path!r} ends with '/': with path.syntax=regex the part "
                                         f"after the last '/' is the regular expression over file names")
            try:
                re.compile(name)
            except re.error as exc:
                raise ConfigurationError(f"path {self.path!r}: {name!r} is not a valid regular expression "
                                         f"({exc})") from None
            if glob.has_magic(directory) or any(c in directory for c in "()|^$\\"):
                raise ConfigurationError(f"path {self.path!r}: with path.syntax=regex the directory "
                                         f"{directory or '/'!r} must be literal; only the file name is a regex")

    @classmethod
    def of(cls, path: str, options: FileSourceOptions) -> PathPattern:
        return cls(path, options.path_syntax, options.exclude, options.exclude_regex)

    @property
    def directory(self) -> str:
        """The deepest directory of the pattern without wildcards (must exist when the stream starts)."""
        if self.syntax == "regex":
            return self.path.rsplit("/", 1)[0] or "/"
        parts = self.path.split("/")
        literal = []
        for part in parts[:-1]:
            if glob.has_magic(part):
                break
            literal.append(part)
        return "/".join(literal) or "/"

    def check(self) -> None:
        """Refuse a pattern whose literal directory does not exist (most often a typo), and a pattern that
        names a directory itself (a missing ``/*``): no line could ever be read from it."""
        if not os.path.isdir(self.directory):
            raise ConfigurationError(f"path {self.path!r}: directory {self.directory!r} does not exist "
                                     f"(or is not a directory)")
        if self.syntax == "regex":  # a name without regex syntax (a '.' escaped or not) names one entry
            directory, name = self.path.rsplit("/", 1)
            plain = name.replace("\\.", ".")
            target = os.path.join(directory or "/", plain)
            literal = re.escape(plain).replace("\\.", ".") == plain
        else:
            target, literal = self.path, not glob.has_magic(self.path)
        if literal and os.path.isdir(target):
            fix = f"{target}/.*" if self.syntax == "regex" else f"{target}/*"
            raise ConfigurationError(f"path {self.path!r} is a directory, not a file pattern; name the files in "
                                     f"it, e.g. {fix!r}")

    def _compiled(self) -> Tuple[Optional[Pattern[str]], Optional[Pattern[str]]]:
        name_re = re.compile(self.path.rsplit("/", 1)[1]) if self.syntax == "regex" else None
        excl = re.compile(self.exclude_regex) if self.exclude_regex else None
        return name_re, excl

    def matches(self, path: str) -> bool:
        """Whether ``path`` is named by the pattern and not excluded (regardless of whether it exists)."""
        name_re, excl = self._compiled()
        if self.syntax == "regex":
            directory, name = os.path.split(path)
            if directory != self.directory or name_re is None or not name_re.fullmatch(name):
                return False
        elif not fnmatch.fnmatchcase(path, self.path):
            return False
        return not self._excluded(path, excl)

    def _excluded(self, path: str, excl: Optional[Pattern[str]]) -> bool:
        name = os.path.basename(path)
        if any(fnmatch.fnmatchcase(name, g) or fnmatch.fnmatchcase(path, g) for g in self.exclude):
            return True
        return excl is not None and excl.search(path) is not None

    def scan(self) -> List[FileStat]:
        """The regular files the pattern names now, sorted by path (vanishing and unreadable ones are left out)."""
        return self.scan_report()[0]

    def scan_report(self, known: Optional[Mapping[str, FileStat]] = None) -> Tuple[List[FileStat], List[Unreadable]]:
        """The readable regular files the pattern names now, sorted by path, and the matched entries that
        cannot be read, as ``(path, reason)`` (files that vanish meanwhile are in neither list).
        ``known``: the previous scan's files by path; an unchanged one is not opened again."""
        seen = time.time_ns()
        name_re, excl = self._compiled()
        problems: List[Unreadable] = []
        if self.syntax == "regex":
            assert name_re is not None
            names = _listdir(self.directory, problems)
            paths = [os.path.join(self.directory, n) for n in names if name_re.fullmatch(n)]
        else:
            paths = self._expand(problems)
        out = []
        excluding = bool(self.exclude) or excl is not None
        for p in sorted(paths):
            if excluding and self._excluded(p, excl):
                continue
            st, reason = _probe(p, seen, None if known is None else known.get(p))
            if st is not None:
                out.append(st)
            elif reason is not None:
                problems.append((p, reason))
        return out, sorted(problems)

    def _expand(self, problems: List[Unreadable]) -> List[str]:
        """The paths the glob names (as :func:`glob.glob` finds them), reporting directories it cannot list
        or enter into ``problems`` (where :func:`glob.glob` passes over them in silence)."""
        parts = self.path.split("/")
        literal = 1
        while literal < len(parts) - 1 and not glob.has_magic(parts[literal]):
            literal += 1
        found = ["/".join(parts[:literal]) or "/"]
        rest = parts[literal:]
        for i, part in enumerate(rest):
            last = i == len(rest) - 1
            nxt: List[str] = []
            for d in found:
                if glob.has_magic(part):
                    names = _listdir(d, problems)
                    if not part.startswith("."):
                        names = [n for n in names if not n.startswith(".")]
                    at = d if d.endswith("/") else d + "/"  # os.path.join(d, n) for a name n without '/'
                    nxt.extend(at + n for n in fnmatch.filter(names, part) if last or os.path.isdir(at + n))
                elif _exists(os.path.join(d, part), d, problems, directory=not last):
                    nxt.append(os.path.join(d, part))
            found = nxt
        return found


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def _listdir(directory: str, problems: List[Unreadable]) -> List[str]:
    try:
        return os.listdir(directory)
    except OSError as exc:
        if exc.errno not in _GONE:
            problems.append((directory, f"cannot list the directory: {_reason(exc)}"))
        return []


def _exists(path: str, parent: str, problems: List[Unreadable], directory: bool) -> bool:
    """Whether ``path`` exists (as a directory when ``directory``); a ``parent`` that cannot be entered is
    reported."""
    try:
        st = os.stat(path) if directory else os.lstat(path)
    except OSError as exc:
        if exc.errno not in _GONE:
            problems.append((parent, f"cannot enter the directory: {_reason(exc)}"))
        return False
    return stat_mod.S_ISDIR(st.st_mode) or not directory


_KINDS = ((stat_mod.S_ISFIFO, "a FIFO"), (stat_mod.S_ISSOCK, "a socket"), (stat_mod.S_ISCHR, "a character device"),
          (stat_mod.S_ISBLK, "a block device"))


def _probe(path: str, seen: int, known: Optional[FileStat]) -> Tuple[Optional[FileStat], Optional[str]]:
    """``(stat, None)`` for a readable regular file; ``(None, reason)`` for a matched entry that cannot be
    read as one; ``(None, None)`` for a directory (not a file to read) or a path that vanished. ``known``:
    the file at ``path`` in an earlier scan (its gzip flag stays while the file is unchanged)."""
    try:
        st = os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ENOENT and os.path.islink(path):
            return None, "a symbolic link to a missing file"
        return None, (None if exc.errno in _GONE else _reason(exc))
    if (known is not None and known.settled and known.inode == st.st_ino and known.dev == st.st_dev
            and known.disk_size == st.st_size and known.mtime_ns == st.st_mtime_ns
            and known.ctime_ns == st.st_ctime_ns):  # as unchanged_since(known, this look); a type never changes
        return known, None  # unchanged since a look that vouches for its bytes: that look stands for this one
    if stat_mod.S_ISDIR(st.st_mode):
        return None, None
    if not stat_mod.S_ISREG(st.st_mode):
        kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a regular file")
        return None, f"{kind}, not a regular file"
    try:  # never opened before it is known to be a regular file: opening a FIFO would block
        with open(path, "rb") as f:
            magic = f.read(2)
    except OSError as exc:
        return None, (None if exc.errno in _GONE else _reason(exc))
    return file_stat(path, st, magic == GZIP_MAGIC, seen), None
