"""kafka-python's exceptions → this library's error tree, by one table (the Kafka error boundary).

Every class in ``kafka.errors`` (subclasses of ``kafka.errors.KafkaError``) is mapped either by
name in :data:`TABLE` or by one of the two base-class rules in :data:`BASE_RULES`:

- a subclass of ``AuthorizationError`` (ACLs refused) → :class:`KafkaAuthError`;
- a subclass of ``RetriableError`` (kafka-python's own "try again" marker) → a retriable
  :class:`KafkaUnavailableError`.

``KafkaError`` and ``BrokerResponseError`` themselves are in the table but are *not* rules, so a
class kafka-python adds later is reported by ``tests/unit/test_errors_map.py`` until someone
decides where it belongs. At run time such a class falls back to the nearest mapped base class.

=====================  ======================================  ==================================
our class              retriable                               kafka-python classes (examples)
=====================  ======================================  ==================================
KafkaUnavailableError  yes (connection: SASL probe, see below)  KafkaConnectionError, KafkaTimeoutError
KafkaUnavailableError  yes                                     every RetriableError, BrokerNotAvailable
KafkaRejectedError     no (the broker said no for good)        ProducerFenced, CorruptRecord, Unknown
KafkaAuthError         no                                      SaslAuthenticationFailed, *Authorization*
ConfigurationError     no                                      KafkaConfiguration, UnsupportedVersion
DataLossError          no                                      UnknownTopicOrPartition, LogTruncation
OffsetRangeError       no                                      OffsetOutOfRange, NoOffsetForPartition
=====================  ======================================  ==================================

kafka-python does not reliably report refused SASL credentials: the broker closes the socket
right after its error response, and the client usually sees only a disconnect and retries until
its bootstrap timeout. So when a connection fails and the config uses SASL PLAIN, the broker is
asked once more directly (:func:`~._sasl_probe.sasl_plain_refused`) whether it refuses these credentials.
"""

from __future__ import annotations

from typing import Dict, NamedTuple, Optional, Tuple, Type

from ..errors import (
    ConfigurationError,
    DataLossError,
    DStreamExactlyOnceError,
    KafkaAuthError,
    KafkaRejectedError,
    KafkaUnavailableError,
    OffsetRangeError,
)
from ._params import KafkaConfig
from ._sasl_probe import sasl_plain_refused

__all__ = ["BASE_RULES", "TABLE", "Rule", "rule_for", "translate_kafka_error"]


class Rule(NamedTuple):
    """Where one kafka-python error class goes."""

    error: Type[DStreamExactlyOnceError]
    #: a connection failure: under SASL PLAIN, ask the broker whether it refuses the credentials
    connection: bool = False

    @property
    def retriable(self) -> bool:
        """The ``retriable`` flag of the translated error: its class's."""
        return self.error.retriable


_UNREACHABLE = Rule(KafkaUnavailableError, connection=True)
_RETRY = Rule(KafkaUnavailableError)
_BROKER = Rule(KafkaRejectedError)
_AUTH = Rule(KafkaAuthError)
_CONFIG = Rule(ConfigurationError)
_LOST = Rule(DataLossError)
_RANGE = Rule(OffsetRangeError)

_GROUPS: Tuple[Tuple[Rule, Tuple[str, ...]], ...] = (
    (_UNREACHABLE, ("KafkaConnectionError", "KafkaTimeoutError")),
    # transient although kafka-python does not mark it retriable
    (_RETRY, ("BrokerNotAvailableError", "RebalanceInProgressError")),
    (_AUTH, (
        "SaslAuthenticationFailedError", "IllegalSaslStateError", "UnsupportedSaslMechanismError",
        "UnacceptableCredentialError", "PrincipalDeserializationFailureError", "DelegationTokenExpiredError",
        "DelegationTokenNotFoundError", "DelegationTokenOwnerMismatchError", "DelegationTokenRequestNotAllowedError",
    )),
    (_CONFIG, (
        "KafkaConfigurationError", "IllegalArgumentError", "InvalidConfigurationError", "UnsupportedVersionError",
        "IncompatibleBrokerVersion", "UnrecognizedBrokerVersion", "UnsupportedCodecError",
        "UnsupportedCompressionTypeError", "UnsupportedForMessageFormatError", "InvalidTopicError",
        "InvalidGroupIdError", "InvalidSessionTimeoutError", "InvalidRequiredAcksError",
        "InvalidTransactionTimeoutError", "InvalidReplicationFactorError", "InvalidReplicationAssignmentError",
        "InvalidPartitionsError", "InvalidCommitOffsetSizeError", "OffsetMetadataTooLargeError",
        "MessageSizeTooLargeError", "RecordListTooLargeError", "PolicyViolationError", "TopicDeletionDisabledError",
        "TopicAlreadyExistsError", "SecurityDisabledError", "DelegationTokenAuthDisabledError",
        "InvalidPrincipalTypeError", "UnsupportedAssignorError", "UnsupportedEndpointTypeError",
        "MismatchedEndpointTypeError", "InconsistentGroupProtocolError", "TelemetryTooLargeError",
        "InvalidTimestampError", "ResourceNotFoundError",
    )),
    (_LOST, ("UnknownTopicOrPartitionError", "UnknownTopicIdError", "InconsistentTopicIdError", "LogTruncationError")),
    (_RANGE, ("OffsetOutOfRangeError", "PositionOutOfRangeError", "NoOffsetForPartitionError")),
    # the broker refused for good: corrupt data, protocol, group / transaction / controller state
    (_BROKER, (
        "KafkaError", "BrokerResponseError", "NoError", "UnknownError", "KafkaProtocolError", "InvalidReceiveError",
        "CorruptRecordError", "InvalidRecordError", "InvalidRecordStateError", "InvalidRequestError",
        "InvalidFetchRequestError", "OffsetMovedToTieredStorageError", "LogDirNotFoundError",
        "CommitFailedError", "IllegalGenerationError", "IllegalStateError", "MemberIdRequiredError",
        "UnknownMemberIdError", "FencedInstanceIdError", "UnreleasedInstanceIdError", "FencedMemberEpochError",
        "StaleMemberEpochError", "GroupIdNotFoundError", "GroupMaxSizeReachedError", "GroupSubscribedToTopicError",
        "NonEmptyGroupError", "UnknownSubscriptionIdError", "ProducerFencedError", "InvalidProducerEpochError",
        "InvalidProducerIdMappingError", "InvalidTxnStateError", "DuplicateSequenceNumberError",
        "OutOfOrderSequenceNumberError", "UnknownProducerIdError", "TransactionAbortableError",
        "TransactionAbortedError", "TransactionCoordinatorFencedError", "TransactionalIdNotFoundError",
        "QuotaViolationError", "OperationNotAttemptedError", "DuplicateResourceError", "ReassignmentInProgressError",
        "NoReassignmentInProgressError", "NewLeaderElectedError", "IneligibleReplicaError", "FeatureUpdateFailedError",
        "BrokerIdNotRegisteredError", "DuplicateBrokerRegistrationError", "InvalidRegistrationError",
        "StaleBrokerEpochError", "StaleControllerEpochError", "UnknownBrokerIdError", "UnknownControllerIdError",
        "InconsistentClusterIdError", "InconsistentVoterSetError", "InvalidUpdateVersionError",
        "InvalidVoterKeyError", "DuplicateVoterError", "VoterNotFoundError", "SnapshotNotFoundError",
        "FencedStateEpochError",
    )),
)

#: kafka-python error class name → rule (explicit entries win over :data:`BASE_RULES`)
TABLE: Dict[str, Rule] = {name: rule for rule, names in _GROUPS for name in names}

#: base class name → rule for every subclass not in :data:`TABLE`, checked in this order
BASE_RULES: Tuple[Tuple[str, Rule], ...] = (("AuthorizationError", _AUTH), ("RetriableError", _RETRY))


def _is_kafka_python(cls: type) -> bool:
    return cls.__module__.split(".")[0] == "kafka"


def rule_for(cls: type) -> Optional[Rule]:
    """The explicit rule for kafka-python error class ``cls``: by name, else by a base-class rule;
    ``None`` if neither applies (an unmapped class)."""
    if not _is_kafka_python(cls):
        return None
    rule = TABLE.get(cls.__name__)
    if rule is not None:
        return rule
    bases = {b.__name__ for b in cls.__mro__ if _is_kafka_python(b)}
    return next((r for base, r in BASE_RULES if base in bases), None)


def _rule_at_run_time(exc: BaseException) -> Optional[Rule]:
    """:func:`rule_for`, else the nearest mapped kafka-python base class (a class added later)."""
    rule = rule_for(type(exc))
    if rule is None:
        rule = next((r for b in type(exc).__mro__[1:] if (r := rule_for(b)) is not None), None)
    return rule


def translate_kafka_error(exc: BaseException, bootstrap: str, what: str,
                          config: Optional[KafkaConfig] = None) -> DStreamExactlyOnceError:
    """Map a kafka-python exception to this library's tree (the caller raises it ``from exc``).

    ``what`` says what was being done ("reading t-0 [5, 9)"); ``config`` (for the SASL probe)
    is never put into the message.
    """
    name = type(exc).__name__
    rule = _rule_at_run_time(exc)
    if rule is None:  # not kafka-python's: builtin socket errors and the like
        if "Authentication" in name:
            rule = _AUTH
        elif isinstance(exc, (TimeoutError, ConnectionError)) or "NoBrokers" in name or "Timeout" in name:
            rule = _UNREACHABLE
        else:
            return KafkaUnavailableError(f"Kafka at {bootstrap}: unexpected {name} while {what}: {exc}")
    if rule.connection:
        refused = sasl_plain_refused(config) if config is not None else None
        if refused is not None:
            return KafkaAuthError(f"Kafka at {bootstrap} refused the credentials while {what}: {refused}")
        err: DStreamExactlyOnceError = KafkaUnavailableError(
            f"cannot reach Kafka at {bootstrap} while {what}: {name}: {exc}")
    elif rule.error is KafkaAuthError:
        if any(b.__name__ == "AuthorizationError" for b in type(exc).__mro__):
            err = KafkaAuthError(f"Kafka at {bootstrap} denied access while {what}: {name}: {exc}")
        else:
            err = KafkaAuthError(f"Kafka at {bootstrap} refused the credentials while {what}: {name}")
    elif rule.error is ConfigurationError:
        err = ConfigurationError(f"Kafka at {bootstrap} refused the configuration or request while {what}: "
                                 f"{name}: {exc}")
    elif rule.error is DataLossError:
        err = DataLossError(f"topic, partition or offsets no longer exist at Kafka {bootstrap} while {what}: "
                            f"{name}: {exc}")
    elif rule.error is OffsetRangeError:
        err = OffsetRangeError(f"offset out of range at Kafka {bootstrap} while {what}: {name}: {exc}")
    else:
        err = rule.error(f"Kafka at {bootstrap} failed while {what}: {name}: {exc}")
    return err
