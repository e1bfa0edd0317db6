"""One exception tree for the whole library.

::

    DStreamExactlyOnceError                  (base; ``retriable`` flag)
    ├── ConfigurationError(ValueError)       bad kafkaParams, URLs, arguments (before anything runs)
    │   └── UnknownKafkaParamError           kafkaParams keys we do not understand
    ├── OffsetRangeError(ValueError)         fromOffset > untilOffset, negative, beyond the log end
    ├── DataLossError                        data gone before it was read (failOnDataLoss, fail.on.data.loss)
    ├── KafkaUnavailableError                broker unreachable or busy (retriable)
    │   ├── KafkaAuthError                   the broker refused the credentials (not retriable)
    │   └── KafkaClosedError                 a Kafka client used after close() (not retriable)
    ├── KafkaRejectedError                   the broker said no for good (not retriable)
    ├── KafkaReadStalledError                the broker holds records the client never returned (retriable)
    ├── DecodeError(ValueError)              a record a decoder could not decode (names t/p/offset)
    ├── StoreError                           transactional store failures
    │   ├── StoreUnavailableError            server unreachable (retriable)
    │   ├── StoreBusyError                   lost to a concurrent transaction (retriable)
    │   ├── StoreAuthError                   wrong password
    │   ├── StoreVersionError                store written by a newer version of this library
    │   ├── OffsetConflictError              compare-and-set on offsets failed (names partition)
    │   └── FencedError                      an older driver epoch tried to commit
    ├── OutputError                          the user's output function raised (names batch/range)
    ├── DriverLiveError                      an operator action refused: the app's driver is live
    ├── CliError                             a dstream-eo command refused or failed (``code``: exit status)
    ├── SinkError                            an external sink (Doris, Kafka) rejected a write
    │   ├── LoadRejectedError                Doris refused a load or 2PC call for good (not retriable)
    │   ├── RowRejectedError(ValueError)     a row does not fit the sink's table schema (not retriable)
    │   └── TableConflictError               a concurrent commit to the sink's table won (retriable)
    └── ServiceError                         a test/demo service (LocalKafka, …) failed to start

``retriable`` is a property of the class, never set on an instance: the class says what a retry
can do. Backend exceptions are translated at one boundary per backend with ``raise ... from exc``:
kafka-python in ``kafka.errors_map.translate_kafka_error`` (a table; ``tests/unit/test_errors_map.py``),
redis-py / psycopg / sqlite3 in each store module (``tests/integration/test_store_errors.py`` checks
none is left unmapped).
"""

from __future__ import annotations

__all__ = [
    "CliError",
    "ConfigurationError",
    "DStreamExactlyOnceError",
    "DataLossError",
    "DecodeError",
    "DriverLiveError",
    "FencedError",
    "KafkaAuthError",
    "KafkaClosedError",
    "KafkaReadStalledError",
    "KafkaRejectedError",
    "KafkaUnavailableError",
    "LoadRejectedError",
    "OffsetConflictError",
    "OffsetRangeError",
    "OutputError",
    "RowRejectedError",
    "ServiceError",
    "SinkError",
    "StoreAuthError",
    "StoreBusyError",
    "StoreError",
    "StoreUnavailableError",
    "StoreVersionError",
    "TableConflictError",
    "UnknownKafkaParamError",
]


class DStreamExactlyOnceError(Exception):
    """Root of every error this library raises.

    ``retriable`` says whether the same call may succeed later unchanged (a server that was down,
    a transient broker error). Correctness never depends on it: nothing is committed on any error.
    """

    retriable: bool = False


class ConfigurationError(DStreamExactlyOnceError, ValueError):
    """Bad configuration or arguments, detected before anything is read or written."""


class UnknownKafkaParamError(ConfigurationError):
    """kafkaParams contain keys this library does not know how to honour."""


class OffsetRangeError(DStreamExactlyOnceError, ValueError):
    """An offset range is malformed or lies outside the partition's log."""


class DataLossError(DStreamExactlyOnceError):
    """Data a planned range should read no longer exists: Kafka offsets (retention, deleted topic) or
    a file's bytes (truncated, deleted or compressed away before they were read)."""


class KafkaUnavailableError(DStreamExactlyOnceError):
    """The Kafka cluster could not be reached or refused the credentials."""

    retriable = True


class KafkaAuthError(KafkaUnavailableError):
    """The Kafka cluster refused the SASL/SSL credentials (the message never contains them)."""

    retriable = False


class KafkaClosedError(KafkaUnavailableError):
    """A Kafka client of this library was used after it was closed (its streaming context was
    stopped); it does not connect again, so a retry cannot help."""

    retriable = False


class KafkaRejectedError(DStreamExactlyOnceError):
    """The broker answered with an error a retry cannot fix: corrupt data, a protocol or state error
    (group, transaction, controller), a fenced producer, an unknown error code."""

    retriable = False


class KafkaReadStalledError(DStreamExactlyOnceError):
    """The broker answers and holds the records of a range, but the Kafka client returned none of them
    for the poll timeout, also after fresh consumers without a fetch session. Not an outage; a replay
    reads with new consumers."""

    retriable = True


class DecodeError(DStreamExactlyOnceError, ValueError):
    """A key/value decoder failed on a record; the message names topic, partition and offset."""


class StoreError(DStreamExactlyOnceError):
    """A transactional store failed; nothing of the transaction was written."""


class StoreUnavailableError(StoreError):
    """The store's server could not be reached within the timeout."""

    retriable = True


class StoreBusyError(StoreError):
    """The transaction lost to a concurrent one (serialization failure, deadlock, lock not
    available) and is rolled back; the same call may succeed on a retry."""

    retriable = True


class StoreAuthError(StoreError):
    """The store's server refused the credentials."""


class StoreVersionError(StoreError):
    """The store was written by a newer version of this library (schema too new)."""


class OffsetConflictError(StoreError):
    """Stored offsets do not match a batch's ranges (neither its start nor its end)."""


class FencedError(StoreError):
    """A driver with an older epoch tried to commit; a newer driver owns the application."""


class OutputError(DStreamExactlyOnceError):
    """The user's output function raised; the batch was not committed.

    ``batch`` and ``offset_ranges`` identify what failed; ``__cause__`` is the user's exception.
    """

    def __init__(self, message: str, *, batch: object = None, offset_ranges: object = None) -> None:
        super().__init__(message)
        self.batch = batch
        self.offset_ranges = offset_ranges


class DriverLiveError(DStreamExactlyOnceError):
    """An operator action was refused because a driver of the application is live (its heartbeat is
    fresh and carries the store's current epoch); stop the driver first, or force the action."""


class CliError(DStreamExactlyOnceError):
    """A ``dstream-eo`` command refused its input or failed: printed as one line on stderr, and
    ``code`` is the command's exit status (1 failed, 2 usage error, 3 refused: a driver is live)."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


class SinkError(DStreamExactlyOnceError):
    """An external sink rejected or failed a write."""

    retriable = True


class LoadRejectedError(SinkError):
    """Doris refused a Stream Load, a two-phase commit call or a state query for good.

    Refused credentials, a non-JSON HTTP 4xx answer, a label held by another attempt's
    pre-committed transaction, a commit of a transaction Doris aborted, an abort of one it
    committed: sending the same request again cannot succeed, so it is not retried.
    """

    retriable = False


class RowRejectedError(SinkError, ValueError):
    """A row does not fit the sink's table schema (a value of the wrong type, a missing column).

    The message names the column, the value's type and the table's type; the same rows fail every
    time, so it is not retried.
    """

    retriable = False


class TableConflictError(SinkError):
    """A concurrent commit to the sink's table won (a Delta Lake ``Concurrent transaction`` conflict).

    Nothing of this attempt is in the table; the next attempt reads the table again (and finds the
    batch there when the winning commit was another attempt of the same batch).
    """

    retriable = True


class ServiceError(DStreamExactlyOnceError):
    """A local service (Kafka, Redis, PostgreSQL, Spark cluster) failed to start or stop."""
