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

from . import exceptions, schema  # noqa: E402
from .auth import (
    Authentication,
    AuthenticationBasic,
    AuthenticationOauth2,
    AuthenticationTLS,
    AuthenticationToken,
)
from .client import Client
from .consumer import (
    BatchReceivePolicy,
    Consumer,
    ConsumerBatchReceivePolicy,
    ConsumerDeadLetterPolicy,
    ConsumerKeySharedPolicy,
    ConsumerType,
    DeadLetterPolicyBuilder,
    InitialPosition,
    KeySharedMode,
    KeySharedPolicy,
    Message,
    Reader,
    RegexSubscriptionMode,
)
from .consumer.message_batch import MessageBatch
from .crypto import ConsumerCryptoFailureAction, CryptoKeyReader, EncryptionContext, EncryptionKey
from .exceptions import *  # noqa: F403
from .factory_options import ProducerOptions, SubscribeOptions
from .failover import AutoClusterFailover
from .loggers import ConsoleLogger, FileLogger, LoggerLevel
from .producer import (
    BatchingType,
    CompressionType,
    DeterministicRouter,
    HashingScheme,
    OutgoingMessage,
    PartitionsRoutingMode,
    Producer,
    ProducerAccessMode,
    recommend_settings,
)
from .protocol.message_id import MessageId
from .schema import BytesSchema
from .service_info import ServiceInfo, ServiceInfoProvider, ServiceUrl
from .table_view import TableView
from .transaction import Transaction, TransactionState, TxnId

__all__ = [
    "Authentication",
    "AuthenticationBasic",
    "AuthenticationOauth2",
    "AuthenticationTLS",
    "AuthenticationToken",
    "AutoClusterFailover",
    "BatchReceivePolicy",
    "BatchingType",
    "BytesSchema",
    "Client",
    "CompressionType",
    "ConsoleLogger",
    "Consumer",
    "ConsumerBatchReceivePolicy",
    "ConsumerCryptoFailureAction",
    "ConsumerDeadLetterPolicy",
    "ConsumerKeySharedPolicy",
    "ConsumerType",
    "CryptoKeyReader",
    "EncryptionContext",
    "EncryptionKey",
    "DeadLetterPolicyBuilder",
    "DeterministicRouter",
    "FileLogger",
    "HashingScheme",
    "InitialPosition",
    "KeySharedMode",
    "KeySharedPolicy",
    "LoggerLevel",
    "Message",
    "MessageBatch",
    "MessageId",
    "OutgoingMessage",
    "PartitionsRoutingMode",
    "Producer",
    "ProducerAccessMode",
    "ProducerOptions",
    "Reader",
    "RegexSubscriptionMode",
    "ServiceInfo",
    "ServiceInfoProvider",
    "ServiceUrl",
    "SubscribeOptions",
    "TableView",
    "Transaction",
    "TransactionState",
    "TxnId",
    "recommend_settings",
    "schema",
]

# Result, PulsarException and every exception class by its official name (pulsar.Timeout, ...).
__all__ += exceptions.__all__
