"""Results and exceptions, named as the official Python client names them.

A user switching clients keeps ``except pulsar.Timeout`` working by importing these names, and
callbacks receive a :class:`Result` just as ``send_async`` callbacks do there.
"""

from __future__ import annotations

import enum

from .protocol.PulsarApi_pb2 import ServerError

__all__ = [
    "PulsarException",
    "Result",
    "AlreadyClosed",
    "AuthenticationError",
    "AuthorizationError",
    "BrokerMetadataError",
    "BrokerPersistenceError",
    "ChecksumError",
    "ConnectError",
    "ConsumerAssignError",
    "ConsumerBusy",
    "ConsumerNotFound",
    "ConsumerNotInitialized",
    "CryptoError",
    "CumulativeAcknowledgementNotAllowedError",
    "ErrorGettingAuthenticationData",
    "IncompatibleSchema",
    "Interrupted",
    "InvalidConfiguration",
    "InvalidMessage",
    "InvalidTopicName",
    "InvalidTxnStatusError",
    "InvalidUrl",
    "LookupError",
    "MemoryBufferIsFull",
    "MessageTooBig",
    "NotAllowedError",
    "NotConnected",
    "OperationNotSupported",
    "ProducerBlockedQuotaExceededError",
    "ProducerBlockedQuotaExceededException",
    "ProducerBusy",
    "ProducerFenced",
    "ProducerNotInitialized",
    "ProducerQueueIsFull",
    "ReadError",
    "ServiceUnitNotReady",
    "SubscriptionNotFound",
    "Timeout",
    "TooManyLookupRequestException",
    "TopicNotFound",
    "TopicTerminated",
    "TransactionConflict",
    "TransactionCoordinatorNotFoundError",
    "TransactionNotFound",
    "UnknownError",
    "UnsupportedVersionError",
]


@enum.unique
class Result(enum.Enum):
    """Outcome passed to asynchronous callbacks."""

    # The official client's names and numbers (never sent on the wire).
    Ok = 0
    UnknownError = 1
    InvalidConfiguration = 2
    Timeout = 3
    LookupError = 4
    ConnectError = 5
    ReadError = 6
    AuthenticationError = 7
    AuthorizationError = 8
    ErrorGettingAuthenticationData = 9
    BrokerMetadataError = 10
    BrokerPersistenceError = 11
    ChecksumError = 12
    ConsumerBusy = 13
    NotConnected = 14
    AlreadyClosed = 15
    InvalidMessage = 16
    ConsumerNotInitialized = 17
    ProducerNotInitialized = 18
    ProducerBusy = 19
    TooManyLookupRequestException = 20
    InvalidTopicName = 21
    InvalidUrl = 22
    ServiceUnitNotReady = 23
    OperationNotSupported = 24
    ProducerBlockedQuotaExceededError = 25
    ProducerBlockedQuotaExceededException = 26
    ProducerQueueIsFull = 27
    MessageTooBig = 28
    TopicNotFound = 29
    SubscriptionNotFound = 30
    ConsumerNotFound = 31
    UnsupportedVersionError = 32
    TopicTerminated = 33
    CryptoError = 34
    IncompatibleSchema = 35
    ConsumerAssignError = 36
    CumulativeAcknowledgementNotAllowedError = 37
    TransactionCoordinatorNotFoundError = 38
    InvalidTxnStatusError = 39
    NotAllowedError = 40
    TransactionConflict = 41
    TransactionNotFound = 42
    ProducerFenced = 43
    MemoryBufferIsFull = 44
    Interrupted = 45

class PulsarException(Exception):
    """Base of every client error; ``result`` says which."""

    result = Result.UnknownError

    def __init__(self, message: str = ""):
        super().__init__(message or self.result.name)


# One class per non-Ok result, named after it and deriving straight from PulsarException, as the
# official client's classes do (pulsar.Timeout, pulsar.ProducerQueueIsFull, ...).


class UnknownError(PulsarException):
    """An error with no more specific result."""

    result = Result.UnknownError


class InvalidConfiguration(PulsarException):
    """A setting or argument the client cannot accept."""

    result = Result.InvalidConfiguration


class Timeout(PulsarException):
    """An operation did not finish within its deadline."""

    result = Result.Timeout


# Shadows the builtin inside this module, as the official client's name does.
class LookupError(PulsarException):  # noqa: A001
    """The broker owning a topic could not be found."""

    result = Result.LookupError


class ConnectError(PulsarException):
    """A connection to the broker could not be opened or was lost."""

    result = Result.ConnectError


class ReadError(PulsarException):
    """Reading from the broker connection failed."""

    result = Result.ReadError


class AuthenticationError(PulsarException):
    """The broker refused the client's credentials."""

    result = Result.AuthenticationError


class AuthorizationError(PulsarException):
    """The client's role may not do what it asked."""

    result = Result.AuthorizationError


class ErrorGettingAuthenticationData(PulsarException):
    """The authentication provider could not supply credentials."""

    result = Result.ErrorGettingAuthenticationData


class BrokerMetadataError(PulsarException):
    """The broker failed reading or writing its metadata store."""

    result = Result.BrokerMetadataError


class BrokerPersistenceError(PulsarException):
    """The broker failed to persist a message."""

    result = Result.BrokerPersistenceError


class ChecksumError(PulsarException):
    """A message's checksum did not match its bytes."""

    result = Result.ChecksumError


class ConsumerBusy(PulsarException):
    """The subscription already has a consumer that excludes this one."""

    result = Result.ConsumerBusy


class NotConnected(PulsarException):
    """The producer or consumer has no broker connection at the moment."""

    result = Result.NotConnected


class AlreadyClosed(PulsarException):
    """The client, producer, consumer or reader was closed."""

    result = Result.AlreadyClosed


class InvalidMessage(PulsarException):
    """A message could not be built or decoded."""

    result = Result.InvalidMessage


class ConsumerNotInitialized(PulsarException):
    """The consumer is not ready for this operation."""

    result = Result.ConsumerNotInitialized


class ProducerNotInitialized(PulsarException):
    """The producer is not ready for this operation."""

    result = Result.ProducerNotInitialized


class ProducerBusy(PulsarException):
    """The topic already has a producer that excludes this one."""

    result = Result.ProducerBusy


class TooManyLookupRequestException(PulsarException):
    """The broker refused a lookup because too many are pending."""

    result = Result.TooManyLookupRequestException


class InvalidTopicName(PulsarException):
    """A topic name that does not parse."""

    result = Result.InvalidTopicName


class InvalidUrl(PulsarException):
    """A service URL that does not parse."""

    result = Result.InvalidUrl


class ServiceUnitNotReady(PulsarException):
    """The topic's bundle is not served yet (the broker is loading or moving it)."""

    result = Result.ServiceUnitNotReady


class OperationNotSupported(PulsarException):
    """The broker or client does not support the operation."""

    result = Result.OperationNotSupported


class ProducerBlockedQuotaExceededError(PulsarException):
    """The producer is held back: the topic's backlog quota is exceeded."""

    result = Result.ProducerBlockedQuotaExceededError


class ProducerBlockedQuotaExceededException(PulsarException):
    """The producer was refused: the topic's backlog quota is exceeded."""

    result = Result.ProducerBlockedQuotaExceededException


class ProducerQueueIsFull(PulsarException):
    """The producer's pending-message queue is full."""

    result = Result.ProducerQueueIsFull


class MessageTooBig(PulsarException):
    """A message is larger than the broker accepts and chunking is off."""

    result = Result.MessageTooBig


class TopicNotFound(PulsarException):
    """The topic does not exist."""

    result = Result.TopicNotFound


class SubscriptionNotFound(PulsarException):
    """The subscription does not exist."""

    result = Result.SubscriptionNotFound


class ConsumerNotFound(PulsarException):
    """The broker has no consumer with this id."""

    result = Result.ConsumerNotFound


class UnsupportedVersionError(PulsarException):
    """The broker's protocol version lacks a feature the request needs."""

    result = Result.UnsupportedVersionError


class TopicTerminated(PulsarException):
    """The topic was terminated and takes no more messages."""

    result = Result.TopicTerminated


class CryptoError(PulsarException):
    """A message could not be encrypted or decrypted."""

    result = Result.CryptoError


class IncompatibleSchema(PulsarException):
    """The schema does not match the topic's."""

    result = Result.IncompatibleSchema


class ConsumerAssignError(PulsarException):
    """The broker could not assign the consumer a partition or key range."""

    result = Result.ConsumerAssignError


class CumulativeAcknowledgementNotAllowedError(PulsarException):
    """Cumulative acknowledgement on a Shared or Key_Shared subscription."""

    result = Result.CumulativeAcknowledgementNotAllowedError


class TransactionCoordinatorNotFoundError(PulsarException):
    """No transaction coordinator serves the request."""

    result = Result.TransactionCoordinatorNotFoundError


class InvalidTxnStatusError(PulsarException):
    """The transaction is not in a state that allows the operation."""

    result = Result.InvalidTxnStatusError


class NotAllowedError(PulsarException):
    """The broker does not allow the operation."""

    result = Result.NotAllowedError


class TransactionConflict(PulsarException):
    """The transaction conflicts with another one."""

    result = Result.TransactionConflict


class TransactionNotFound(PulsarException):
    """The transaction does not exist."""

    result = Result.TransactionNotFound


class ProducerFenced(PulsarException):
    """Another producer took exclusive access to the topic."""

    result = Result.ProducerFenced


class MemoryBufferIsFull(PulsarException):
    """The client's memory limit for pending messages is reached."""

    result = Result.MemoryBufferIsFull


class Interrupted(PulsarException):
    """A blocking call was interrupted."""

    result = Result.Interrupted


_BY_RESULT: dict[Result, type[PulsarException]] = {cls.result: cls for cls in PulsarException.__subclasses__()}


def exception_for(result: Result, message: str = "") -> PulsarException:
    """The exception instance for a failed result."""
    return _BY_RESULT.get(result, UnknownError)(message)


_SERVER_ERRORS: dict[int, Result] = {
    ServerError.MetadataError: Result.BrokerMetadataError,
    ServerError.PersistenceError: Result.BrokerPersistenceError,
    ServerError.AuthenticationError: Result.AuthenticationError,
    ServerError.AuthorizationError: Result.AuthorizationError,
    ServerError.ConsumerBusy: Result.ConsumerBusy,
    ServerError.ServiceNotReady: Result.ServiceUnitNotReady,
    ServerError.ChecksumError: Result.ChecksumError,
    ServerError.UnsupportedVersionError: Result.UnsupportedVersionError,
    ServerError.TopicNotFound: Result.TopicNotFound,
    ServerError.SubscriptionNotFound: Result.SubscriptionNotFound,
    ServerError.ConsumerNotFound: Result.ConsumerNotFound,
    ServerError.TopicTerminatedError: Result.TopicTerminated,
    ServerError.ProducerBusy: Result.ProducerBusy,
    ServerError.InvalidTopicName: Result.InvalidTopicName,
    ServerError.ConsumerAssignError: Result.ConsumerAssignError,
    ServerError.NotAllowedError: Result.NotAllowedError,
    ServerError.ProducerFenced: Result.ProducerFenced,
    ServerError.IncompatibleSchema: Result.IncompatibleSchema,
    ServerError.TransactionCoordinatorNotFound: Result.TransactionCoordinatorNotFoundError,
    ServerError.InvalidTxnStatus: Result.InvalidTxnStatusError,
    ServerError.TransactionConflict: Result.TransactionConflict,
    ServerError.TransactionNotFound: Result.TransactionNotFound,
}


def result_for_server_error(error: int) -> Result:
    """Map a broker ServerError code to the client's Result."""
    return _SERVER_ERRORS.get(error, Result.UnknownError)


# Errors worth retrying while an operation's deadline lasts (the broker may be restarting).
RETRYABLE = frozenset(
    {
        Result.UnknownError,
        Result.ConnectError,
        Result.ServiceUnitNotReady,
        Result.BrokerMetadataError,
        Result.BrokerPersistenceError,
        Result.NotConnected,
        Result.Timeout,
    }
)
