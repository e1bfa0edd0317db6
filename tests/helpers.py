"""Helpers shared by the test suite.

:func:`eventually` is the one way a test waits for a state it can poll (a committed batch, a file, a
log line): it polls instead of sleeping a guessed time, and fails with a message naming what it
waited for. :func:`run_cli` runs ``dstream-eo`` in-process; :func:`logrotate` rotates a log as logrotate does.
"""

from __future__ import annotations

import subprocess
import time
from typing import Any, Callable, Optional, Tuple, Type, TypeVar

from dstream_exactly_once.testing._logs import logrotate  # noqa: F401 - the tests import it from here

T = TypeVar("T")


def eventually(
    condition: Callable[[], T],
    what: str = "condition",
    timeout: float = 90.0,
    *,
    interval: float = 0.2,
    proc: Optional[subprocess.Popen] = None,  # type: ignore[type-arg]
    detail: Optional[Callable[[], str]] = None,
    each: Optional[Callable[[], None]] = None,
    ignore: Tuple[Type[BaseException], ...] = (),
) -> T:
    """Poll ``condition()`` until it returns a true value, and return that value.

    - ``what``: named in the failure message ("timed out after 90s waiting for <what>").
    - ``proc``: a process the state depends on; its exit fails the wait at once (it can no longer
      get there), naming its exit status.
    - ``detail``: called on failure; its text (a log tail) is appended to the message.
    - ``each``: called before every poll (e.g. restarting a supervised process).
    - ``ignore``: exception types ``condition()`` may raise while the state is not reachable yet
      (a store that is restarting); they count as "not yet".

    Raises :class:`AssertionError` on timeout or when ``proc`` exits.
    """
    deadline = time.monotonic() + timeout

    def fail(why: str) -> AssertionError:
        extra = detail() if detail is not None else ""
        return AssertionError(f"{why}{(chr(10) + extra) if extra else ''}")

    while True:
        if each is not None:
            each()
        try:
            got = condition()
        except ignore:
            got = None  # type: ignore[assignment]
        if got:
            return got
        if proc is not None and proc.poll() is not None:
            raise fail(f"the process exited with {proc.returncode} before {what}")
        if time.monotonic() > deadline:
            raise fail(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def run_cli(capsys: Any, *argv: str) -> Tuple[int, str, str]:
    """``dstream-eo argv`` in-process: ``(exit status, stdout, stderr)`` (argparse's usage errors too)."""
    from dstream_exactly_once.cli import main

    capsys.readouterr()
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse usage errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err
