"""Which files a path pattern names: an absolute glob, or a regular expression over file names.

- ``glob`` (default): the whole absolute path, Python :mod:`glob` syntax (``/var/log/app/service.log.*``;
  wildcards may appear in directories too).
- ``regex``: ``/literal/directory/<regex>``; the regular expression (everything after the last ``/``)
  must match a file's whole *name* in that directory (``/var/log/app/service\\.log(\\.\\d+)?``).

Only regular files count; ``exclude`` globs (against the name or the whole path) and
``exclude.regex`` (searched in the whole path) remove files.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import re
from dataclasses import dataclass
from typing import List, Optional, Pattern, Tuple

from ..errors import ConfigurationError
from .identity import FileStat, stat_file
from .options import FileSourceOptions

__all__ = ["PathPattern"]


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
        """Refuse a pattern whose literal directory does not exist (most often a typo)."""
        if not os.path.isdir(self.directory):
            raise ConfigurationError(f"path {self.path!r}: directory {self.directory!r} does not exist "
                                     f"(or is not a directory)")

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
        """The regular files the pattern names now, sorted by path (vanishing ones are skipped)."""
        name_re, excl = self._compiled()
        if self.syntax == "regex":
            try:
                names = os.listdir(self.directory)
            except OSError:
                names = []
            assert name_re is not None
            paths = [os.path.join(self.directory, n) for n in names if name_re.fullmatch(n)]
        else:
            paths = glob.glob(self.path)
        out = []
        for p in sorted(paths):
            if self._excluded(p, excl):
                continue
            st = stat_file(p)
            if st is not None:
                out.append(st)
        return out
