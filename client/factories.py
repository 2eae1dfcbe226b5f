"""The client's factories with the official signatures: ``create_producer``, ``subscribe``, ``create_reader``,
``create_table_view``.

Every official argument is here in the official position with the official default, so a call
written for ``pulsar.Client`` (positional or keyword) means the same here. Arguments of this client
of its own follow, keyword only. The deliberate differences: ``schema=None`` stands for
``BytesSchema()``; ``batching_enabled=None`` means "on unless chunking is" (the official sync
client's default is off).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from .consumer import Consumer, ConsumerType, Message, Reader, create_reader, subscribe
from .consumer.dead_letter import ConsumerDeadLetterPolicy
from .consumer.settings import ConsumerBatchReceivePolicy, ConsumerKeySharedPolicy, InitialPosition, RegexSubscriptionMode
from .crypto import ConsumerCryptoFailureAction, KeyReader
from .producer import BatchingType, CompressionType, PartitionsRoutingMode, Producer, ProducerAccessMode, create_producer
from .producer.interceptors import ProducerInterceptor
from .producer.routers import HashingScheme
from .protocol.message_id import MessageId
from .schema import Schema
from .schema.base import SchemaSource
from .services import ClientServices
from .table_view import TableView, create_table_view

__all__ = ["ClientFactories"]


class FactoryHost(ClientServices, SchemaSource, Protocol):
    """The client, as its factories use it: services for what they create, schemas for consumers."""


class ClientFactories:
    """Producer, consumer and reader factories of :class:`~.client.Client`."""

    def create_producer(
        self: FactoryHost,
        topic: str,
        producer_name: str | None = None,
        schema: Schema[Any] | None = None,
        initial_sequence_id: int | None = None,
        send_timeout_millis: int = 30000,
        compression_type: CompressionType = CompressionType.NONE,
        max_pending_messages: int = 1000,
        max_pending_messages_across_partitions: int = 50000,
        block_if_queue_full: bool = False,
        batching_enabled: bool | None = None,
        batching_max_messages: int = 1000,
        batching_max_allowed_size_in_bytes: int = 128 * 1024,
        batching_max_publish_delay_ms: int = 10,
        chunking_enabled: bool = False,
        message_routing_mode: PartitionsRoutingMode = PartitionsRoutingMode.RoundRobinDistribution,
        lazy_start_partitioned_producers: bool = False,
        properties: Mapping[str, str] | None = None,
        batching_type: BatchingType = BatchingType.Default,
        encryption_key: str | Sequence[str] | None = None,
        crypto_key_reader: KeyReader | None = None,
        access_mode: ProducerAccessMode = ProducerAccessMode.Shared,
        message_router: Callable[[Any, int], int] | None = None,
        *,
        hashing_scheme: HashingScheme | None = None,
        skip_full_partitions: bool | None = None,
        batching_partition_switch_frequency_by_publish_delay: int | None = None,
        interceptors: Sequence[ProducerInterceptor] | None = None,
        stats_log_interval_seconds: float | None = None,
    ) -> Producer:
        """A producer on ``topic`` (partitioned or not) sending values encoded by ``schema`` (default: bytes).

        As ``pulsar.Client.create_producer``; then ``hashing_scheme`` (of message keys, default
        JavaStringHash), ``skip_full_partitions`` (round robin passes over partitions whose queue
        is full), ``batching_partition_switch_frequency_by_publish_delay``, ``interceptors`` and
        ``stats_log_interval_seconds`` (this producer's own stats line).
        """
        return create_producer(
            self,
            topic,
            producer_name=producer_name,
            schema=schema,
            initial_sequence_id=initial_sequence_id,
            send_timeout_millis=send_timeout_millis,
            compression_type=compression_type,
            max_pending_messages=max_pending_messages,
            max_pending_messages_across_partitions=max_pending_messages_across_partitions,
            block_if_queue_full=block_if_queue_full,
            batching_enabled=batching_enabled,
            batching_max_messages=batching_max_messages,
            batching_max_allowed_size_in_bytes=batching_max_allowed_size_in_bytes,
            batching_max_publish_delay_ms=batching_max_publish_delay_ms,
            chunking_enabled=chunking_enabled,
            message_routing_mode=message_routing_mode,
            lazy_start_partitioned_producers=lazy_start_partitioned_producers,
            properties=properties,
            batching_type=batching_type,
            encryption_key=encryption_key,
            crypto_key_reader=crypto_key_reader,
            access_mode=access_mode,
            message_router=message_router,
            hashing_scheme=hashing_scheme,
            skip_full_partitions=skip_full_partitions,
            batching_partition_switch_frequency_by_publish_delay=batching_partition_switch_frequency_by_publish_delay,
            interceptors=interceptors,
            stats_log_interval_seconds=stats_log_interval_seconds,
        )

    def subscribe(
        self: FactoryHost,
        topic: str | list[str] | re.Pattern[str],
        subscription_name: str,
        consumer_type: ConsumerType = ConsumerType.Exclusive,
        schema: Schema[Any] | None = None,
        message_listener: Callable[[Consumer, Message], None] | None = None,
        receiver_queue_size: int = 1000,
        max_total_receiver_queue_size_across_partitions: int = 50000,
        consumer_name: str | None = None,
        unacked_messages_timeout_ms: int | None = None,
        broker_consumer_stats_cache_time_ms: int = 30000,
        negative_ack_redelivery_delay_ms: int = 60000,
        is_read_compacted: bool = False,
        properties: dict[str, str] | None = None,
        pattern_auto_discovery_period: int = 60,
        initial_position: InitialPosition = InitialPosition.Latest,
        crypto_key_reader: KeyReader | None = None,
        replicate_subscription_state_enabled: bool = False,
        max_pending_chunked_message: int = 10,
        auto_ack_oldest_chunked_message_on_queue_full: bool = False,
        start_message_id_inclusive: bool = False,
        batch_receive_policy: ConsumerBatchReceivePolicy | None = None,
        key_shared_policy: ConsumerKeySharedPolicy | None = None,
        batch_index_ack_enabled: bool = False,
        regex_subscription_mode: RegexSubscriptionMode = RegexSubscriptionMode.PersistentOnly,
        dead_letter_policy: ConsumerDeadLetterPolicy | None = None,
        crypto_failure_action: ConsumerCryptoFailureAction = ConsumerCryptoFailureAction.FAIL,
        *,
        ack_group_time_ms: int = 100,
        ack_group_max_size: int = 1000,
        ack_receipt_enabled: bool = False,
    ) -> Consumer:
        """A consumer on a topic, a list of topics or a regex pattern, whose messages' ``value()`` decodes
        with ``schema`` (default: bytes).

        As ``pulsar.Client.subscribe`` (``broker_consumer_stats_cache_time_ms`` has no effect: there
        is no broker consumer stats call to cache); then the ack grouping window and size, and
        ``ack_receipt_enabled`` (acknowledge waits for the broker's receipt).
        """
        if isinstance(schema, Schema):  # anything else is refused, by name, with the other settings
            schema.attach_client(self)
        return subscribe(
            self,
            topic,
            subscription_name,
            consumer_type=consumer_type,
            schema=schema,
            message_listener=message_listener,
            receiver_queue_size=receiver_queue_size,
            max_total_receiver_queue_size_across_partitions=max_total_receiver_queue_size_across_partitions,
            consumer_name=consumer_name,
            unacked_messages_timeout_ms=unacked_messages_timeout_ms,
            broker_consumer_stats_cache_time_ms=broker_consumer_stats_cache_time_ms,
            negative_ack_redelivery_delay_ms=negative_ack_redelivery_delay_ms,
            is_read_compacted=is_read_compacted,
            properties=properties,
            pattern_auto_discovery_period=pattern_auto_discovery_period,
            initial_position=initial_position,
            crypto_key_reader=crypto_key_reader,
            replicate_subscription_state_enabled=replicate_subscription_state_enabled,
            max_pending_chunked_message=max_pending_chunked_message,
            auto_ack_oldest_chunked_message_on_queue_full=auto_ack_oldest_chunked_message_on_queue_full,
            start_message_id_inclusive=start_message_id_inclusive,
            batch_receive_policy=batch_receive_policy,
            key_shared_policy=key_shared_policy,
            batch_index_ack_enabled=batch_index_ack_enabled,
            regex_subscription_mode=regex_subscription_mode,
            dead_letter_policy=dead_letter_policy,
            crypto_failure_action=crypto_failure_action,
            ack_group_time_ms=ack_group_time_ms,
            ack_group_max_size=ack_group_max_size,
            ack_receipt_enabled=ack_receipt_enabled,
        )

    def create_reader(
        self: FactoryHost,
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
    ) -> Reader:
        """A reader from ``start_message_id`` decoding with ``schema`` (default: bytes), as
        ``pulsar.Client.create_reader``."""
        if isinstance(schema, Schema):  # anything else is refused, by name, with the other settings
            schema.attach_client(self)
        return create_reader(
            self,
            topic,
            start_message_id,
            schema,
            reader_listener=reader_listener,
            receiver_queue_size=receiver_queue_size,
            reader_name=reader_name,
            subscription_role_prefix=subscription_role_prefix,
            is_read_compacted=is_read_compacted,
            crypto_key_reader=crypto_key_reader,
            start_message_id_inclusive=start_message_id_inclusive,
            crypto_failure_action=crypto_failure_action,
        )

    def create_table_view(
        self: FactoryHost, topic: str, subscription_name: str | None = None, schema: Schema[Any] | None = None
    ) -> TableView:
        """The latest value of every key of ``topic``, decoded with ``schema`` (default: bytes), kept up
        to date; as ``pulsar.Client.create_table_view``."""
        if isinstance(schema, Schema):  # anything else is refused, by name, with the other arguments
            schema.attach_client(self)
        return create_table_view(self, topic, subscription_name, schema)
