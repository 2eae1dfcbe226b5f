"""Results and exceptions, named as the official Python client names them.

A user switching clients keeps ``except pulsar.Timeout`` working by importing these names, and
callbacks receive a :class:`Result` just as ``send_async`` callbacks do there.
"""

from __future__ import annotations

import enum

from .protocol.PulsarApi_pb2 import ServerError


class Result(enum.Enum):
    """Outcome passed to asynchronous callbacks."""

    Ok = 0
    UnknownError = 1
    InvalidConfiguration = 2
    Timeout = 3
    LookupError = 4
    ConnectError = 5
    ReadError = 6
    AuthenticationError = 7
    AuthorizationError = 8
    BrokerMetadataError = 11
    BrokerPersistenceError = 12
    ChecksumError = 13
    ConsumerBusy = 14
    NotConnected = 15
    AlreadyClosed = 16
    InvalidMessage = 17
    ProducerBusy = 20
    InvalidTopicName = 23
    ServiceUnitNotReady = 25
    ProducerQueueIsFull = 29
    MessageTooBig = 30
    TopicNotFound = 31
    SubscriptionNotFound = 32
    ConsumerNotFound = 33
    UnsupportedVersionError = 34
    TopicTerminated = 35
    ConsumerAssignError = 38
    CumulativeAcknowledgementNotAllowedError = 39
    NotAllowedError = 43
    ProducerFenced = 45
    MemoryBufferIsFull = 46
    Interrupted = 47


class PulsarException(Exception):
    """Base of every client error; ``result`` says which."""

    result = Result.UnknownError

    def __init__(self, message: str = ""):
        super().__init__(message or self.result.name)


def _define(result: Result) -> type[PulsarException]:
    return type(result.name, (PulsarException,), {"result": result, "__doc__": f"Result.{result.name}."})


# One exception class per non-Ok result, named after it (pulsar.Timeout, pulsar.ProducerQueueIsFull, ...).
_BY_RESULT: dict[Result, type[PulsarException]] = {r: _define(r) for r in Result if r is not Result.Ok}

UnknownError = _BY_RESULT[Result.UnknownError]
InvalidConfiguration = _BY_RESULT[Result.InvalidConfiguration]
Timeout = _BY_RESULT[Result.Timeout]
ConnectError = _BY_RESULT[Result.ConnectError]
AlreadyClosed = _BY_RESULT[Result.AlreadyClosed]
NotConnected = _BY_RESULT[Result.NotConnected]
ProducerQueueIsFull = _BY_RESULT[Result.ProducerQueueIsFull]
MemoryBufferIsFull = _BY_RESULT[Result.MemoryBufferIsFull]
MessageTooBig = _BY_RESULT[Result.MessageTooBig]
InvalidTopicName = _BY_RESULT[Result.InvalidTopicName]
CumulativeAcknowledgementNotAllowedError = _BY_RESULT[Result.CumulativeAcknowledgementNotAllowedError]


def __getattr__(name: str) -> type[PulsarException]:
    # The less common exception classes, by name (``exceptions.ConsumerBusy``).
    try:
        return _BY_RESULT[Result[name]]
    except KeyError:
        raise AttributeError(name) from None


def exception_for(result: Result, message: str = "") -> PulsarException:
    """The exception instance for a failed result."""
    return _BY_RESULT.get(result, UnknownError)(message)


_SERVER_ERRORS = {
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
