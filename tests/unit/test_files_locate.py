"""A planned file range is found wherever rotation moved it before any loss is declared.

Rotation by rename (``service.log.N`` -> ``service.log.N+1``) and by copytruncate, one or many steps
between planning and reading, and renames *while* a reader or the planner lists the directory (a
listing hook renames between the listing and the ``stat`` of each name): every line is read once and
no loss is reported. A compressed file whose content cannot be read is a real loss, reported with
every file examined.
"""

from __future__ import annotations

import gzip
import os
import shutil
from collections import Counter
from typing import List

import pytest

from dstream_exactly_once.errors import DataLossError
from dstream_exactly_once.files import FilePlanner, FileRangeReader, FileSourceOptions
from dstream_exactly_once.files import _paths as paths

from ._files_harness import Harness, lines, names, write


def _rotated(directory: str) -> List[int]:
    return sorted(int(n.rsplit(".", 1)[1]) for n in os.listdir(directory) if n.startswith("service.log."))


def rotate(directory: str, copytruncate: bool = False) -> None:
    """One logrotate step: every ``service.log.N`` becomes ``.N+1``, then ``service.log`` becomes ``.1``
    (by rename and a new empty file, or by copy and truncate)."""
    log = os.path.join(directory, "service.log")
    for n in reversed(_rotated(directory)):
        os.rename(f"{log}.{n}", f"{log}.{n + 1}")
    if copytruncate:
        shutil.copyfile(log, log + ".1")
        os.truncate(log, 0)
    else:
        os.rename(log, log + ".1")
        write(log, "")


def _files(tmp_path) -> str:
    """``service.log`` and ``service.log.1`` .. ``.3``, each with its own lines (``f3`` in ``.3``)."""
    d = str(tmp_path)
    for n in (3, 2, 1):
        write(f"{d}/service.log.{n}", lines(f"f{n}-", 0, 200))
    write(f"{d}/service.log", lines("f0-", 0, 200))
    return d


def _reader_and_range(d: str, **opts):
    o = FileSourceOptions.from_mapping({k.replace("_", "."): v for k, v in opts.items()})
    planner = FilePlanner(f"{d}/service.log*", o)
    planner.start({})
    (r,) = [r for r in planner.plan() if r.path.endswith("service.log.3")]
    return r, planner.reader()


@pytest.mark.parametrize("steps", [1, 2, 6])
def test_a_range_is_read_after_rotation_steps_of_rename_and_copytruncate(tmp_path, steps):
    d = _files(tmp_path)
    r, reader = _reader_and_range(d)
    for k in range(steps):
        write(f"{d}/service.log", lines(f"new{k}-", 0, 5))
        rotate(d, copytruncate=k % 2 == 1)
    lost: list = []
    assert list(reader.reporting_to(lost.append).read(r)) == names("f3-", 0, 200)
    assert lost == []


class ShiftWhileListing:
    """A listing hook: after the directory is listed, one rotation step runs before the names are
    stat-ed (a rename between the listing and the ``stat``), ``times`` times."""

    def __init__(self, monkeypatch, directory: str, times: int = 1, copytruncate: bool = False) -> None:
        self.directory, self.left, self.copytruncate, self.listings = directory, times, copytruncate, 0
        real = paths._listdir

        def listing(d, problems):
            found = real(d, problems)
            self.listings += 1
            if self.left > 0 and d.rstrip("/") == self.directory.rstrip("/"):
                self.left -= 1
                rotate(self.directory, self.copytruncate)
            return found

        monkeypatch.setattr(paths, "_listdir", listing)


def test_a_rename_between_listing_and_stat_is_not_a_loss(tmp_path, monkeypatch):
    d = _files(tmp_path)
    r, reader = _reader_and_range(d, fail_on_data_loss=True)
    rotate(d)  # the planned file is service.log.4 now; service.log.3 holds other bytes
    hook = ShiftWhileListing(monkeypatch, d)  # ... and becomes service.log.5 while the reader lists
    assert list(reader.read(r)) == names("f3-", 0, 200)
    assert hook.listings >= 2  # the first listing could not see it: it was listed again


def test_a_loss_is_declared_only_after_every_listing_and_names_where_it_looked(tmp_path, monkeypatch):
    d = _files(tmp_path)
    r, reader = _reader_and_range(d)
    planned = f"{d}/service.log.3"
    with open(planned, "rb") as f:
        data = f.read()
    os.remove(planned)
    with gzip.open(f"{d}/service.log.3.gz", "wb") as gz:  # compressed ...
        gz.write(data)
    assert list(reader.read(r)) == names("f3-", 0, 200)  # ... a whole gzip file is read decompressed
    with open(f"{d}/service.log.3.gz", "r+b") as f:  # a gzip file cut short: its content cannot be read
        f.truncate(os.path.getsize(f"{d}/service.log.3.gz") // 2)
    hook = ShiftWhileListing(monkeypatch, d, times=0)
    lost: list = []
    assert list(reader.reporting_to(lost.append).read(r)) == []
    assert hook.listings == 4  # every listing made before the loss was declared
    (loss,) = lost
    assert (loss.start, loss.end, loss.lost) == (0, r.end, r.end)
    for where in (f"{planned}: gone", "service.log.3.gz: a compressed file whose content cannot be read",
                  "service.log.1: other first bytes", "4 listings of the pattern"):
        assert where in loss.reason, loss.reason
    strict = FileRangeReader(f"{d}/service.log*", FileSourceOptions.from_mapping({"fail.on.data.loss": True}))
    with pytest.raises(DataLossError, match=r"service\.log\.3\.gz: a compressed file"):
        list(strict.read(r))


@pytest.mark.parametrize("copytruncate", [False, True], ids=["rename", "copytruncate"])
def test_the_planner_does_not_take_a_file_renamed_while_it_lists_for_gone(tmp_path, monkeypatch, copytruncate):
    d = _files(tmp_path)
    h = Harness(f"{d}/service.log*", bytes_max=1000, fail_on_data_loss=True)
    seen: Counter[str] = Counter(h.batch())
    for k in range(3):
        write(f"{d}/service.log", lines(f"new{k}-", 0, 50))
        ShiftWhileListing(monkeypatch, d, copytruncate=copytruncate)
        seen.update(h.batch())  # raised "disappeared with unread bytes" when one listing was taken as final
        if k == 1:
            h.restart()
    monkeypatch.undo()
    seen.update(h.drain())
    expected = [n for i in range(4) for n in names(f"f{i}-", 0, 200)]
    expected += [n for k in range(3) for n in names(f"new{k}-", 0, 50)]
    assert seen == Counter(expected)
    assert h.planner.counters["losses"] == 0
