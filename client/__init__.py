"""Pure-Python Apache Pulsar client; never imports airflow.

The names mirror the official ``pulsar`` package, so switching is one import::

    import airflow_pulsar.client as pulsar

    client = pulsar.Client("pulsar://localhost:6650")
    producer = client.create_producer("my-topic")
"""

from __future__ import annotations

from .dependencies import CLIENT_DEPENDENCIES, check

# Before anything imports them: a version outside the declared range fails here, by name.
check(CLIENT_DEPENDENCIES)

from . import exceptions  # noqa: E402
from .auth import Authentication, AuthenticationToken
from .client import Client
from .consumer import (
    Consumer,
    ConsumerBatchReceivePolicy,
    ConsumerDeadLetterPolicy,
    ConsumerKeySharedPolicy,
    ConsumerType,
    InitialPosition,
    KeySharedMode,
    Message,
    Reader,
)
from .exceptions import *  # noqa: F403
from .producer import (
    BatchingType,
    CompressionType,
    HashingScheme,
    PartitionsRoutingMode,
    Producer,
    ProducerAccessMode,
    recommend_settings,
)
from .protocol.message_id import MessageId
from .table_view import TableView

__all__ = [
    "Authentication",
    "AuthenticationToken",
    "BatchingType",
    "Client",
    "CompressionType",
    "Consumer",
    "ConsumerBatchReceivePolicy",
    "ConsumerDeadLetterPolicy",
    "ConsumerKeySharedPolicy",
    "ConsumerType",
    "HashingScheme",
    "InitialPosition",
    "KeySharedMode",
    "Message",
    "MessageId",
    "PartitionsRoutingMode",
    "Producer",
    "ProducerAccessMode",
    "Reader",
    "TableView",
    "recommend_settings",
]

# Result, PulsarException and every exception class by its official name (pulsar.Timeout, ...).
__all__ += exceptions.__all__
