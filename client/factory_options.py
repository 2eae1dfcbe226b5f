"""What the client's factories take, declared once for the blocking and the asyncio API.

Each declaration is a dataclass of the options that follow a factory's leading arguments (the
topic, the subscription name, the start message id): the official arguments in the official
order with the official defaults, then this client's own, keyword only. The factory methods of
:class:`~.client.Client` and of :class:`~.asyncio.Client` take their signatures from it (see
:mod:`.factory_signature`), so a new option is one field here, and the core that implements it.

The official modules differ in a few places, which a field records in its metadata: an option
only one API has (:func:`only_in`), and a default of the asyncio API's own (:func:`asyncio_default`).
The deliberate differences from the official defaults (``schema=None`` for bytes, batching on
unless chunking is) are in docs/client.md.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING, Any

from .consumer.dead_letter import ConsumerDeadLetterPolicy
from .consumer.settings import (
    ConsumerBatchReceivePolicy,
    ConsumerKeySharedPolicy,
    ConsumerSettings,
    ConsumerType,
    InitialPosition,
    RegexSubscriptionMode,
)
from .crypto import ConsumerCryptoFailureAction, KeyReader
from .producer.config import BatchingType, ProducerAccessMode, ProducerConfig
from .producer.interceptors import ProducerInterceptor
from .producer.routers import HashingScheme, PartitionsRoutingMode
from .protocol.compression import CompressionType
from .schema import Schema

if TYPE_CHECKING:
    from .consumer import Consumer, Message, Reader

__all__ = [
    "Api",
    "ProducerOptions",
    "ReaderOptions",
    "SubscribeOptions",
    "api_default",
    "asyncio_default",
    "in_api",
    "keywords",
    "only_in",
]


class Api(enum.Enum):
    """The two APIs over the same core: ``pulsar.Client`` and ``pulsar.asyncio.Client``."""

    SYNC = "sync"
    ASYNCIO = "asyncio"


def only_in(api: Api, default: Any) -> Any:
    """A field for an option that only ``api`` takes (the other never sees it; it keeps ``default``)."""
    return field(default=default, metadata={"only_in": api})


def asyncio_default(default: Any, asyncio: Any) -> Any:
    """A field whose default is ``default`` in the blocking API and ``asyncio`` in the asyncio one."""
    return field(default=default, metadata={"asyncio_default": asyncio})


def in_api(option: dataclasses.Field[Any], api: Api) -> bool:
    """Whether ``api`` takes ``option``."""
    return option.metadata.get("only_in", api) is api


def api_default(option: dataclasses.Field[Any], api: Api) -> Any:
    """The default of ``option`` in ``api``."""
    return option.metadata.get("asyncio_default", option.default) if api is Api.ASYNCIO else option.default


def keywords(options: Any) -> dict[str, Any]:
    """The options as the core's keyword arguments: every option of the blocking API."""
    return {option.name: getattr(options, option.name) for option in dataclasses.fields(options) if in_api(option, Api.SYNC)}


def _refuse_unknown(options: type[Any], factory: str, settings: Mapping[str, Any]) -> None:
    """``TypeError`` listing the keyword arguments of ``factory`` among ``settings`` that ``options`` lacks."""
    unknown = sorted(set(settings) - {option.name for option in dataclasses.fields(options)})
    if unknown:
        raise TypeError(f"{factory}() got unexpected keyword argument(s): {', '.join(unknown)}")


@dataclass(frozen=True)
class ProducerOptions:
    """The options of ``create_producer`` after the topic, as ``pulsar.Client.create_producer`` has them;
    then ``hashing_scheme`` (of message keys), ``skip_full_partitions`` (round robin passes over
    partitions whose queue is full), ``batching_partition_switch_frequency_by_publish_delay``,
    ``interceptors`` and ``stats_log_interval_seconds`` (this producer's own stats line).

    None stands for an option's default (so 0 can mean 0); ``batching_enabled=None`` for "on
    unless chunking is", which is what the object holds once built. :meth:`check` validates
    them as ``create_producer`` does, without connecting; :meth:`from_settings` builds them
    from its keyword arguments.
    """

    producer_name: str | None = None
    schema: Schema[Any] | None = None
    initial_sequence_id: int | None = None
    send_timeout_millis: int = 30000
    compression_type: CompressionType = CompressionType.NONE
    max_pending_messages: int = 1000
    max_pending_messages_across_partitions: int = 50000
    block_if_queue_full: bool = False
    # The official sync API turns batching off; its asyncio API, and ours, batch.
    batching_enabled: bool | None = asyncio_default(None, True)
    batching_max_messages: int = 1000
    batching_max_allowed_size_in_bytes: int = 128 * 1024
    batching_max_publish_delay_ms: int = 10
    chunking_enabled: bool = False
    message_routing_mode: PartitionsRoutingMode = PartitionsRoutingMode.RoundRobinDistribution
    # Accepted for the official signature; every partition producer starts when the producer does.
    lazy_start_partitioned_producers: bool = False
    properties: Mapping[str, str] | None = None
    batching_type: BatchingType = BatchingType.Default
    encryption_key: str | Sequence[str] | None = None
    crypto_key_reader: KeyReader | None = None
    access_mode: ProducerAccessMode = ProducerAccessMode.Shared
    message_router: Callable[[Any, int], int] | None = None
    _: KW_ONLY
    hashing_scheme: HashingScheme = HashingScheme.JavaStringHash
    skip_full_partitions: bool = False
    batching_partition_switch_frequency_by_publish_delay: int = 10
    interceptors: Sequence[ProducerInterceptor] = ()
    stats_log_interval_seconds: float | None = None

    def __post_init__(self) -> None:
        for option in dataclasses.fields(self):
            if getattr(self, option.name) is None and option.default is not None:
                object.__setattr__(self, option.name, option.default)
        if self.batching_enabled is None:
            object.__setattr__(self, "batching_enabled", not self.chunking_enabled)

    @classmethod
    def from_settings(cls, **settings: Any) -> ProducerOptions:
        """The options ``create_producer`` keyword arguments give; ``TypeError`` lists those it does not take."""
        _refuse_unknown(cls, "create_producer", settings)
        return cls(**settings)

    def config(self) -> ProducerConfig:
        """The options checked (type, range, combination) and converted, as ``create_producer``
        uses them; ``ValueError`` names the first bad one."""
        return ProducerConfig.from_options(self)

    def check(self) -> None:
        """Check every option as ``create_producer`` does, without connecting; ``ValueError`` names
        the first bad one."""
        self.config()


@dataclass(frozen=True)
class SubscribeOptions:
    """The options of ``subscribe`` after the topic and the subscription name, as ``pulsar.Client.subscribe``
    has them (``broker_consumer_stats_cache_time_ms`` has no effect: there is no broker consumer
    stats call to cache); then the ack grouping window and size, and ``ack_receipt_enabled``
    (acknowledge waits for the broker's receipt).

    ``pulsar.asyncio.Client.subscribe`` takes no listener and no pattern discovery period, and
    takes ``is_pattern_topic`` (the topic is a regex) after the others.
    """

    consumer_type: ConsumerType = ConsumerType.Exclusive
    schema: Schema[Any] | None = None
    message_listener: Callable[[Consumer, Message], None] | None = only_in(Api.SYNC, None)
    receiver_queue_size: int = 1000
    max_total_receiver_queue_size_across_partitions: int = 50000
    consumer_name: str | None = None
    unacked_messages_timeout_ms: int | None = None
    broker_consumer_stats_cache_time_ms: int = 30000
    negative_ack_redelivery_delay_ms: int = 60000
    is_read_compacted: bool = False
    properties: dict[str, str] | None = None
    pattern_auto_discovery_period: int = only_in(Api.SYNC, 60)
    initial_position: InitialPosition = InitialPosition.Latest
    crypto_key_reader: KeyReader | None = None
    replicate_subscription_state_enabled: bool = False
    max_pending_chunked_message: int = 10
    auto_ack_oldest_chunked_message_on_queue_full: bool = False
    start_message_id_inclusive: bool = False
    batch_receive_policy: ConsumerBatchReceivePolicy | None = None
    key_shared_policy: ConsumerKeySharedPolicy | None = None
    batch_index_ack_enabled: bool = False
    regex_subscription_mode: RegexSubscriptionMode = RegexSubscriptionMode.PersistentOnly
    dead_letter_policy: ConsumerDeadLetterPolicy | None = None
    crypto_failure_action: ConsumerCryptoFailureAction = ConsumerCryptoFailureAction.FAIL
    is_pattern_topic: bool = only_in(Api.ASYNCIO, False)
    _: KW_ONLY
    ack_group_time_ms: int = 100
    ack_group_max_size: int = 1000
    ack_receipt_enabled: bool = False

    @classmethod
    def from_settings(cls, **settings: Any) -> SubscribeOptions:
        """The options ``subscribe`` keyword arguments give; ``TypeError`` lists those it does not take."""
        _refuse_unknown(cls, "subscribe", settings)
        return cls(**settings)

    def check(self, subscription_name: str) -> None:
        """Check every option (type, range, combination) as ``subscribe`` does for
        ``subscription_name``, without connecting; ``ValueError`` names the first bad one."""
        ConsumerSettings(subscription_name, **keywords(self))


@dataclass(frozen=True)
class ReaderOptions:
    """The options of ``create_reader`` after the topic and the start message id, as
    ``pulsar.Client.create_reader`` has them; ``pulsar.asyncio.Client.create_reader`` takes no listener."""

    schema: Schema[Any] | None = None
    reader_listener: Callable[[Reader, Message], None] | None = only_in(Api.SYNC, None)
    receiver_queue_size: int = 1000
    reader_name: str | None = None
    subscription_role_prefix: str | None = None
    is_read_compacted: bool = False
    crypto_key_reader: KeyReader | None = None
    start_message_id_inclusive: bool = False
    crypto_failure_action: ConsumerCryptoFailureAction = ConsumerCryptoFailureAction.FAIL
