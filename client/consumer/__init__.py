"""The consumer side of the client: subscribe, create_reader, and what they return.

``subscribe`` and ``create_reader`` take the official ``pulsar.Client`` methods' keyword
arguments, with the same names and defaults.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..arguments import check, check_type
from ..crypto import ConsumerCryptoFailureAction, KeyReader
from ..exceptions import InvalidConfiguration
from ..protocol.message_id import MessageId
from ..schema import Schema
from ..topic_name import TopicName
from .consumer import Consumer
from .dead_letter import ConsumerDeadLetterPolicy, DeadLetterPolicy, DeadLetterPolicyBuilder
from .message import Message, MessageFields
from .multi_topics import MultiTopicsConsumer, partitions_of
from .reader import Reader, check_start, reader_settings
from .settings import (
    BatchReceivePolicy,
    ConsumerBatchReceivePolicy,
    ConsumerKeySharedPolicy,
    ConsumerSettings,
    ConsumerType,
    InitialPosition,
    KeySharedMode,
    KeySharedPolicy,
    RegexSubscriptionMode,
)
from .stats import ConsumerStats
from .unpacker import ReceivedEntry

if TYPE_CHECKING:
    from ..services import ClientServices

__all__ = [
    "BatchReceivePolicy",
    "Consumer",
    "ConsumerBatchReceivePolicy",
    "ConsumerDeadLetterPolicy",
    "ConsumerKeySharedPolicy",
    "ConsumerStats",
    "ConsumerType",
    "DeadLetterPolicy",
    "DeadLetterPolicyBuilder",
    "InitialPosition",
    "KeySharedMode",
    "KeySharedPolicy",
    "Message",
    "MessageFields",
    "MessageId",
    "Reader",
    "ReceivedEntry",
    "RegexSubscriptionMode",
    "create_reader",
    "subscribe",
]


def subscribe(
    client: ClientServices, topic: str | list[str] | re.Pattern[str], subscription_name: str, **settings: Any
) -> Consumer:
    """Subscribe to a topic, a list of topics or a compiled regex pattern (``pulsar.Client.subscribe``)."""
    config = ConsumerSettings(subscription_name, **settings)
    return _open(client, topic, config)


def _open(
    client: ClientServices, topic: str | list[str] | re.Pattern[str], config: ConsumerSettings, start: MessageId | None = None
) -> Consumer:
    if isinstance(topic, re.Pattern) or (isinstance(topic, list) and topic):
        check(not isinstance(topic, list) or all(isinstance(t, str) for t in topic), "topic", "a list of str names", topic)
        return MultiTopicsConsumer(client, topic, config, start)
    if not isinstance(topic, str) or not topic:
        raise ValueError(f"Argument topic is expected to be a str, a non-empty list of str or a re.Pattern, got {topic!r}")
    partitions = partitions_of(client, topic)
    if len(partitions) > 1 or partitions[0][1] >= 0 and TopicName.parse(topic).partition < 0:
        return MultiTopicsConsumer(client, [topic], config, start)
    name, partition = partitions[0]
    return Consumer.of_partition(client, name, partition, config, start)


def create_reader(
    client: ClientServices,
    topic: str,
    start_message_id: MessageId,
    schema: Schema[Any] | None = None,
    reader_listener: Callable[[Reader, Message], None] | None = None,
    receiver_queue_size: int = 1000,
    reader_name: str | None = None,
    subscription_role_prefix: str | None = None,
    is_read_compacted: bool = False,
    crypto_key_reader: KeyReader | None = None,
    start_message_id_inclusive: bool = False,
    crypto_failure_action: ConsumerCryptoFailureAction = ConsumerCryptoFailureAction.FAIL,
    *,
    subscription_name: str | None = None,
    batch_receive_policy: ConsumerBatchReceivePolicy | None = None,
) -> Reader:
    """A reader of ``topic`` from ``start_message_id`` (``pulsar.Client.create_reader``); its own
    ``subscription_name`` (the Java reader builder's) wins over ``subscription_role_prefix``, and
    ``batch_receive_policy`` bounds its consumer's ``batch_receive`` (for bulk readers such as the
    Spark ingest; neither is on the official ``create_reader``)."""
    start = check_start(start_message_id)
    check_type(str, topic, "topic")
    check(bool(topic), "topic", "a non-empty str", topic)
    config = reader_settings(
        receiver_queue_size, reader_name, subscription_role_prefix, is_read_compacted, start_message_id_inclusive, subscription_name
    )
    # replace() validates the settings again.
    config = dataclasses.replace(
        config,
        schema=schema or config.schema,
        crypto_key_reader=crypto_key_reader,
        crypto_failure_action=crypto_failure_action,
        batch_receive_policy=batch_receive_policy,
    )
    check(reader_listener is None or callable(reader_listener), "reader_listener", "callable", reader_listener)
    if len(partitions_of(client, topic)) > 1 and start not in (MessageId.earliest, MessageId.latest):
        raise InvalidConfiguration("a reader of a partitioned topic starts at MessageId.earliest or MessageId.latest")

    def open_consumer(reader: Reader) -> Consumer:
        if reader_listener is not None:
            config.message_listener = lambda _consumer, message: reader_listener(reader, message)
        return _open(client, topic, config, start)

    return Reader(open_consumer, start)
