"""``wait_replicas``: a Redis write is acknowledged only once replicas confirmed it (``WAIT``).

Redis replicates asynchronously: a primary answers a script before any replica has it, so a
failover right after a commit can lose that commit. With ``wait_replicas=N`` every write script of
:class:`~dstream_exactly_once.stores.RedisStore` (all but heartbeats) is sent in one pipeline
on ONE connection, followed by

1. a *touch* script that sets the application's ``schema`` key to its own value: a write on this
   connection after the script, so the connection's replication offset covers the script's
   writes even when the script itself wrote nothing (an idempotent replay that found its batch
   already committed, possibly by an attempt whose confirmation was missing);
2. ``WAIT N wait_timeout``: how many replicas acknowledged everything this connection wrote.

``WAIT`` counts per connection, which is why the three go on one connection, never through a
pool that might hand each command another one. Fewer than ``N`` confirmations is an *in-doubt*
outcome: the write is on the primary, but a failover now may lose it. It raises
:class:`~dstream_exactly_once.errors.StoreUnavailableError` (retriable): a retry finds its batch
in the commit log (``REPLAYED``) and waits again, so the outcome is acknowledged only once
replicated.
"""

from __future__ import annotations

from typing import Any, List, Mapping, NamedTuple, Tuple

from ...errors import ConfigurationError, StoreUnavailableError
from .._url import redact_url

__all__ = ["WRITTEN_STATUSES", "WaitOptions", "in_doubt_error", "script_then_wait", "wait_options"]

#: script replies after which the write is on the primary (done now, or found done before)
WRITTEN_STATUSES = ("applied", "replayed", "exists", "purged")

_TOUCH = "local v = redis.call('GET', KEYS[1]); if v then redis.call('SET', KEYS[1], v) end; return 1"


class WaitOptions(NamedTuple):
    """``replicas`` to wait for after each write (0: do not wait) and ``timeout_ms`` to wait."""

    replicas: int = 0
    timeout_ms: int = 1000


def wait_options(url: str, options: Mapping[str, str]) -> WaitOptions:
    """``wait_replicas`` (an int >= 0, default 0) and ``wait_timeout`` (milliseconds, an int >= 1,
    default 1000) from a Redis URL's options."""
    values = []
    for name, low, default in (("wait_replicas", 0, 0), ("wait_timeout", 1, 1000)):
        raw = options.get(name)
        if raw is None:
            values.append(default)
            continue
        if not raw.isdigit() or int(raw) < low:
            unit = "a number of replicas (an int >= 0)" if low == 0 else "milliseconds (an int >= 1)"
            raise ConfigurationError(f"store option {name} must be {unit}, got {raw!r} in {redact_url(url)!r}")
        values.append(int(raw))
    return WaitOptions(*values)


def script_then_wait(conn: Any, script: Tuple[str, str], keys: List[str], arg: str, wait: WaitOptions,
                     *, asking: bool = False) -> Tuple[Any, int]:
    """Run ``script`` (``(text, sha)``; ``keys[0]`` is the schema key) on one connection of the
    single-node client ``conn``, touch, ``WAIT``; returns ``(the script's reply or the error it
    raised, replicas that confirmed)``. ``asking`` sends ``ASKING`` before each script (an ``ASK``
    redirection during a slot migration)."""
    import hashlib

    import redis.exceptions as rex

    touch = (_TOUCH, hashlib.sha1(_TOUCH.encode()).hexdigest())
    for cached in (True, False):
        pipe = conn.pipeline(transaction=False)
        for text, sha, args in ((script[0], script[1], (len(keys), *keys, arg)), (touch[0], touch[1], (1, keys[0]))):
            if asking:
                pipe.execute_command("ASKING")
            if cached:
                pipe.evalsha(sha, *args)
            else:
                pipe.eval(text, *args)
        pipe.execute_command("WAIT", wait.replicas, wait.timeout_ms)
        replies = pipe.execute(raise_on_error=False)
        if asking:
            replies = [replies[1], replies[3], replies[4]]
        if cached and any(isinstance(r, rex.NoScriptError) for r in replies[:2]):
            continue  # the script cache is empty after a restart / failover: send the text
        acked = replies[2]
        return replies[0], acked if isinstance(acked, int) else 0
    raise AssertionError("unreachable")


def in_doubt_error(app_id: str, wait: WaitOptions, where: str, what: str, acked: int) -> StoreUnavailableError:
    """The error for a write fewer replicas confirmed than ``wait_replicas`` asks."""
    return StoreUnavailableError(
        f"Redis at {where}: the {what} of app {app_id!r} is in doubt: it ran on the primary but "
        f"{acked} replica(s) confirmed it within wait_timeout={wait.timeout_ms} ms, wait_replicas="
        f"{wait.replicas} asks for {wait.replicas}; a failover now may lose it. Retried within store_retry; "
        f"once the replicas are back in sync (redis-cli INFO replication: master_link_status:up), restart "
        f"the stream: the commit log shows the write REPLAYED if it survived, or it is applied again")
