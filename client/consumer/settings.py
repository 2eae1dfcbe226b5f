"""Consumer settings: the official client's keyword arguments, checked once, with clear errors.

Names and defaults follow ``pulsar.Client.subscribe``; a few extras the official Python client
does not expose (ack grouping, ack receipts) come after them with the Java client's defaults.
A bad argument raises ``ValueError`` naming it, as the official wrapper does. The policy objects
(batch receive, Key_Shared) are here with the builder-style objects their ``policy()`` returns.
"""

from __future__ import annotations

import enum
import itertools
from dataclasses import dataclass, field
from typing import Any

from ..arguments import check, check_type, is_int, to_enum
from ..crypto import ConsumerCryptoFailureAction, KeyReader
from ..protocol.PulsarApi_pb2 import CommandGetTopicsOfNamespace, CommandSubscribe, IntRange, KeySharedMeta
from ..protocol.PulsarApi_pb2 import KeySharedMode as _WireKeySharedMode
from ..schema import BytesSchema, Schema
from .dead_letter import ConsumerDeadLetterPolicy
from .unacked_tracker import MIN_ACK_TIMEOUT_MS

DEFAULT_BATCH_RECEIVE_MAX_BYTES = 10 * 1024 * 1024
DEFAULT_BATCH_RECEIVE_TIMEOUT_MS = 100


class ConsumerType(enum.IntEnum):
    """Subscription types, valued as the official client's ``pulsar.ConsumerType``."""

    Exclusive = 0
    Shared = 1
    Failover = 2
    KeyShared = 3

    @property
    def wire(self) -> int:
        """The CommandSubscribe.SubType value."""
        return (CommandSubscribe.Exclusive, CommandSubscribe.Shared, CommandSubscribe.Failover, CommandSubscribe.Key_Shared)[
            self.value
        ]


class InitialPosition(enum.IntEnum):
    """Where a new subscription starts, valued as ``pulsar.InitialPosition``."""

    Latest = 0
    Earliest = 1


class KeySharedMode(enum.IntEnum):
    """How Key_Shared assigns keys, valued as ``pulsar.KeySharedMode``."""

    AutoSplit = 0
    Sticky = 1


class RegexSubscriptionMode(enum.IntEnum):
    """Which topics a pattern subscription takes, valued as ``pulsar.RegexSubscriptionMode``."""

    PersistentOnly = 0
    NonPersistentOnly = 1
    AllTopics = 2

    @property
    def wire(self) -> int:
        """The CommandGetTopicsOfNamespace.Mode value."""
        modes = CommandGetTopicsOfNamespace
        return (modes.PERSISTENT, modes.NON_PERSISTENT, modes.ALL)[self.value]

    @property
    def domains(self) -> frozenset[str]:
        """The topic domains the mode takes: ``persistent``, ``non-persistent``, or both."""
        return (_PERSISTENT, _NON_PERSISTENT, _PERSISTENT | _NON_PERSISTENT)[self.value]


_PERSISTENT = frozenset({"persistent"})
_NON_PERSISTENT = frozenset({"non-persistent"})


class BatchReceivePolicy:
    """The batch receive limits as the official core holds them (``pulsar.BatchReceivePolicy``)."""

    def __init__(self, max_num_messages: int, max_num_bytes: int, timeout_ms: int):
        for name, value in (("max_num_messages", max_num_messages), ("max_num_bytes", max_num_bytes), ("timeout_ms", timeout_ms)):
            check_type(int, value, name)
        if max_num_messages <= 0 and max_num_bytes <= 0 and timeout_ms <= 0:
            raise ValueError("a batch receive policy needs a message limit, a byte limit or a timeout")
        self._limits = (max_num_messages, max_num_bytes, max(timeout_ms, 0))

    def getMaxNumMessages(self) -> int:  # noqa: N802 - the official name
        """Messages per batch (<= 0: no limit)."""
        return self._limits[0]

    def getMaxNumBytes(self) -> int:  # noqa: N802 - the official name
        """Bytes per batch (<= 0: no limit)."""
        return self._limits[1]

    def getTimeoutMs(self) -> int:  # noqa: N802 - the official name
        """How long ``batch_receive`` waits for the limits to fill, in ms."""
        return self._limits[2]


class ConsumerBatchReceivePolicy:
    """Limits of one ``batch_receive``: messages, bytes (<= 0: no limit) and the wait in ms."""

    def __init__(self, max_num_message: int, max_num_bytes: int, timeout_ms: int):
        for name, value in (("max_num_message", max_num_message), ("max_num_bytes", max_num_bytes), ("timeout_ms", timeout_ms)):
            check_type(int, value, name)
        self._policy = BatchReceivePolicy(max_num_message, max_num_bytes, timeout_ms)

    @property
    def max_num_message(self) -> int:
        """Messages per batch (<= 0: no limit)."""
        return self._policy.getMaxNumMessages()

    @property
    def max_num_bytes(self) -> int:
        """Bytes per batch (<= 0: no limit)."""
        return self._policy.getMaxNumBytes()

    @property
    def timeout_ms(self) -> int:
        """How long ``batch_receive`` waits, in ms."""
        return self._policy.getTimeoutMs()

    def policy(self) -> BatchReceivePolicy:
        """The underlying :class:`BatchReceivePolicy`, as the official ``policy()`` returns it."""
        return self._policy

    def __repr__(self) -> str:
        return f"ConsumerBatchReceivePolicy({self.max_num_message}, {self.max_num_bytes}, {self.timeout_ms})"


class KeySharedPolicy:
    """Key_Shared options as the official core holds them (``pulsar.KeySharedPolicy``): set, then read."""

    def __init__(self) -> None:
        self._mode = KeySharedMode.AutoSplit
        self._out_of_order = False
        self._ranges: list[tuple[int, int]] = []

    def set_key_shared_mode(self, mode: KeySharedMode) -> None:
        """Auto split or sticky hash ranges."""
        self._mode = to_enum(KeySharedMode, mode, "key_shared_mode")

    def get_key_shared_mode(self) -> KeySharedMode:
        """The mode set (AutoSplit unless changed)."""
        return self._mode

    def set_allow_out_of_order_delivery(self, allow: bool) -> None:
        """Whether the broker may deliver a key's messages out of order when consumers change."""
        check_type(bool, allow, "allow_out_of_order_delivery")
        self._out_of_order = allow

    def is_allow_out_of_order_delivery(self) -> bool:
        """Whether out-of-order delivery is allowed."""
        return self._out_of_order

    def set_sticky_ranges(self, ranges: list[tuple[int, int]]) -> None:
        """The hash ranges (inclusive, within 0..65535) a sticky consumer takes: at least one, and
        no two overlapping (the same range twice passes, as in the official core)."""
        check(bool(ranges), "sticky_ranges", "at least one (start, end) range", ranges)
        for start, end in ranges:
            ok = is_int(start) and is_int(end) and 0 <= start <= end < 65536
            check(ok, "sticky_ranges", "(start, end) pairs with 0 <= start <= end <= 65535", (start, end))
        pairs = sorted({(start, end) for start, end in ranges})
        for (_, end), (next_start, _) in itertools.pairwise(pairs):
            check(end < next_start, "sticky_ranges", "ranges that do not overlap", ranges)
        self._ranges = [(start, end) for start, end in ranges]

    def get_sticky_ranges(self) -> list[tuple[int, int]]:
        """The sticky ranges set."""
        return list(self._ranges)


class ConsumerKeySharedPolicy:
    """Key_Shared options: auto split or sticky hash ranges (inclusive, within 0..65535)."""

    def __init__(
        self,
        key_shared_mode: KeySharedMode = KeySharedMode.AutoSplit,
        allow_out_of_order_delivery: bool = False,
        sticky_ranges: list[tuple[int, int]] | None = None,
    ):
        policy = self._policy = KeySharedPolicy()
        policy.set_key_shared_mode(key_shared_mode)
        policy.set_allow_out_of_order_delivery(bool(allow_out_of_order_delivery))
        if policy.get_key_shared_mode() == KeySharedMode.Sticky and sticky_ranges is None:
            raise ValueError("When using key_shared_mode = KeySharedMode.Sticky you must also provide sticky_ranges")
        if sticky_ranges is not None:
            policy.set_sticky_ranges(list(sticky_ranges))

    @property
    def key_shared_mode(self) -> KeySharedMode:
        """Auto split or sticky."""
        return self._policy.get_key_shared_mode()

    @property
    def allow_out_of_order_delivery(self) -> bool:
        """Whether out-of-order delivery is allowed."""
        return self._policy.is_allow_out_of_order_delivery()

    @property
    def sticky_ranges(self) -> list[tuple[int, int]]:
        """The sticky hash ranges."""
        return self._policy.get_sticky_ranges()

    def policy(self) -> KeySharedPolicy:
        """The underlying :class:`KeySharedPolicy`, as the official ``policy()`` returns it."""
        return self._policy

    def to_wire(self) -> KeySharedMeta:
        """The KeySharedMeta of the SUBSCRIBE command."""
        mode = _WireKeySharedMode.STICKY if self.key_shared_mode == KeySharedMode.Sticky else _WireKeySharedMode.AUTO_SPLIT
        return KeySharedMeta(
            keySharedMode=mode,
            hashRanges=[IntRange(start=s, end=e) for s, e in self.sticky_ranges],
            allowOutOfOrderDelivery=self.allow_out_of_order_delivery,
        )


@dataclass
class ConsumerSettings:
    """Everything a consumer was configured with, validated."""

    subscription_name: str
    consumer_type: ConsumerType = ConsumerType.Exclusive
    # Decodes ``Message.value()``; declared on SUBSCRIBE when the broker keeps its type.
    schema: Schema[Any] = field(default_factory=BytesSchema)
    message_listener: Any = None
    receiver_queue_size: int = 1000
    max_total_receiver_queue_size_across_partitions: int = 50000
    consumer_name: str | None = None
    unacked_messages_timeout_ms: int | None = None
    # Accepted for the official signature; this client has no broker consumer stats call to cache.
    broker_consumer_stats_cache_time_ms: int = 30000
    negative_ack_redelivery_delay_ms: int = 60000
    is_read_compacted: bool = False
    properties: dict[str, str] | None = None
    pattern_auto_discovery_period: int = 60
    initial_position: InitialPosition = InitialPosition.Latest
    # Reads the private keys that decrypt encrypted messages.
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
    ack_group_time_ms: int = 100
    ack_group_max_size: int = 1000
    ack_receipt_enabled: bool = False
    durable: bool = True

    def __post_init__(self) -> None:
        check_type(str, self.subscription_name, "subscription_name")
        check(bool(self.subscription_name), "subscription_name", "a non-empty str", self.subscription_name)
        self.consumer_type = to_enum(ConsumerType, self.consumer_type, "consumer_type")
        if self.schema is None:
            self.schema = BytesSchema()
        check(isinstance(self.schema, Schema), "schema", "a Schema (airflow_pulsar.client.schema)", self.schema)
        self.initial_position = to_enum(InitialPosition, self.initial_position, "initial_position")
        self.regex_subscription_mode = to_enum(RegexSubscriptionMode, self.regex_subscription_mode, "regex_subscription_mode")
        self.crypto_failure_action = to_enum(ConsumerCryptoFailureAction, self.crypto_failure_action, "crypto_failure_action")
        check(
            self.crypto_key_reader is None or isinstance(self.crypto_key_reader, KeyReader),
            "crypto_key_reader", "a CryptoKeyReader (airflow_pulsar.client) or have get_public_key and get_private_key",
            self.crypto_key_reader,
        )
        check(
            self.message_listener is None or callable(self.message_listener), "message_listener", "callable", self.message_listener
        )
        for name in (
            "receiver_queue_size",
            "max_total_receiver_queue_size_across_partitions",
            "max_pending_chunked_message",
            "ack_group_max_size",
            "ack_group_time_ms",
            "broker_consumer_stats_cache_time_ms",
        ):
            value = getattr(self, name)
            check(is_int(value) and value >= 0, name, "an int >= 0", value)
        check(
            is_int(self.negative_ack_redelivery_delay_ms) and self.negative_ack_redelivery_delay_ms >= 0,
            "negative_ack_redelivery_delay_ms", "an int >= 0", self.negative_ack_redelivery_delay_ms,
        )
        check(
            is_int(self.pattern_auto_discovery_period) and self.pattern_auto_discovery_period > 0,
            "pattern_auto_discovery_period", "an int > 0", self.pattern_auto_discovery_period,
        )
        if self.unacked_messages_timeout_ms is not None:
            check(
                is_int(self.unacked_messages_timeout_ms)
                and (self.unacked_messages_timeout_ms == 0 or self.unacked_messages_timeout_ms >= MIN_ACK_TIMEOUT_MS),
                "unacked_messages_timeout_ms", f"None, 0 or an int >= {MIN_ACK_TIMEOUT_MS}", self.unacked_messages_timeout_ms,
            )
        check(self.consumer_name is None or isinstance(self.consumer_name, str), "consumer_name", "a str or None", self.consumer_name)
        check(self.properties is None or isinstance(self.properties, dict), "properties", "a dict or None", self.properties)
        for name in (
            "is_read_compacted",
            "auto_ack_oldest_chunked_message_on_queue_full",
            "start_message_id_inclusive",
            "replicate_subscription_state_enabled",
            "batch_index_ack_enabled",
            "ack_receipt_enabled",
        ):
            check(isinstance(getattr(self, name), bool), name, "a bool", getattr(self, name))
        check(
            self.batch_receive_policy is None or isinstance(self.batch_receive_policy, ConsumerBatchReceivePolicy),
            "batch_receive_policy", "a ConsumerBatchReceivePolicy or None", self.batch_receive_policy,
        )
        check(
            self.key_shared_policy is None or isinstance(self.key_shared_policy, ConsumerKeySharedPolicy),
            "key_shared_policy", "a ConsumerKeySharedPolicy or None", self.key_shared_policy,
        )
        check(
            self.dead_letter_policy is None or isinstance(self.dead_letter_policy, ConsumerDeadLetterPolicy),
            "dead_letter_policy", "a ConsumerDeadLetterPolicy or None", self.dead_letter_policy,
        )

    @property
    def shared(self) -> bool:
        """Shared and Key_Shared: acks are per message, and cumulative acks are refused."""
        return self.consumer_type in (ConsumerType.Shared, ConsumerType.KeyShared)

    def batch_receive_limits(self) -> tuple[int, int, float]:
        """(max messages, max bytes, timeout seconds) of ``batch_receive``; the C++ client's defaults."""
        policy = self.batch_receive_policy
        if policy is None:
            return -1, DEFAULT_BATCH_RECEIVE_MAX_BYTES, DEFAULT_BATCH_RECEIVE_TIMEOUT_MS / 1000
        return policy.max_num_message, policy.max_num_bytes, policy.timeout_ms / 1000
