"""Consumer settings: the official client's keyword arguments, checked once, with clear errors.

Names and defaults follow ``pulsar.Client.subscribe``; a few extras the official Python client
does not expose (ack grouping, ack receipts) come after them with the Java client's defaults.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from ..exceptions import InvalidConfiguration
from ..protocol.PulsarApi_pb2 import CommandSubscribe
from ..protocol.PulsarApi_pb2 import KeySharedMode as _WireKeySharedMode
from ..schema import BytesSchema, Schema

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


class RegexSubscriptionMode(enum.IntEnum):
    """Which topics a pattern subscription matches, valued as ``pulsar.RegexSubscriptionMode``."""

    PersistentOnly = 0
    NonPersistentOnly = 1
    AllTopics = 2


class KeySharedMode(enum.IntEnum):
    """How Key_Shared assigns keys, valued as ``pulsar.KeySharedMode``."""

    AutoSplit = 0
    Sticky = 1


class ConsumerBatchReceivePolicy:
    """Limits of one ``batch_receive``: messages, bytes (<= 0: no limit) and the wait in ms."""

    def __init__(self, max_num_message: int, max_num_bytes: int, timeout_ms: int):
        for name, value in (("max_num_message", max_num_message), ("max_num_bytes", max_num_bytes), ("timeout_ms", timeout_ms)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise InvalidConfiguration(f"{name} must be an int, got {value!r}")
        if max_num_message <= 0 and max_num_bytes <= 0 and timeout_ms <= 0:
            raise InvalidConfiguration("batch receive policy needs a message limit, a byte limit or a timeout")
        self.max_num_message = max_num_message
        self.max_num_bytes = max_num_bytes
        self.timeout_ms = max(timeout_ms, 0)

    def __repr__(self) -> str:
        return f"ConsumerBatchReceivePolicy({self.max_num_message}, {self.max_num_bytes}, {self.timeout_ms})"


class ConsumerKeySharedPolicy:
    """Key_Shared options: auto split or sticky hash ranges (inclusive, within 0..65535)."""

    def __init__(
        self,
        key_shared_mode: KeySharedMode = KeySharedMode.AutoSplit,
        allow_out_of_order_delivery: bool = False,
        sticky_ranges: list[tuple[int, int]] | None = None,
    ):
        self.key_shared_mode = KeySharedMode(int(key_shared_mode))
        self.allow_out_of_order_delivery = bool(allow_out_of_order_delivery)
        self.sticky_ranges = list(sticky_ranges or [])
        if self.key_shared_mode == KeySharedMode.Sticky and not self.sticky_ranges:
            raise InvalidConfiguration("sticky_ranges must be given for KeySharedMode.Sticky")
        for start, end in self.sticky_ranges:
            if not 0 <= start <= end < 65536:
                raise InvalidConfiguration(f"sticky_ranges entry ({start}, {end}) must satisfy 0 <= start <= end <= 65535")

    def to_wire(self) -> Any:
        """The KeySharedMeta of the SUBSCRIBE command."""
        from ..protocol.PulsarApi_pb2 import IntRange, KeySharedMeta

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
    negative_ack_redelivery_delay_ms: int = 60000
    is_read_compacted: bool = False
    properties: dict[str, str] | None = None
    pattern_auto_discovery_period: int = 60
    initial_position: InitialPosition = InitialPosition.Latest
    max_pending_chunked_message: int = 10
    auto_ack_oldest_chunked_message_on_queue_full: bool = False
    start_message_id_inclusive: bool = False
    batch_receive_policy: ConsumerBatchReceivePolicy | None = None
    key_shared_policy: ConsumerKeySharedPolicy | None = None
    batch_index_ack_enabled: bool = False
    dead_letter_policy: Any = None
    ack_group_time_ms: int = 100
    ack_group_max_size: int = 1000
    ack_receipt_enabled: bool = False
    durable: bool = True

    def __post_init__(self) -> None:
        _check(
            isinstance(self.subscription_name, str) and bool(self.subscription_name),
            "subscription_name", "a non-empty str", self.subscription_name,
        )
        self.consumer_type = _enum(ConsumerType, self.consumer_type, "consumer_type")
        if self.schema is None:
            self.schema = BytesSchema()
        _check(isinstance(self.schema, Schema), "schema", "a Schema (airflow_pulsar.client.schema)", self.schema)
        self.initial_position = _enum(InitialPosition, self.initial_position, "initial_position")
        _check(
            self.message_listener is None or callable(self.message_listener), "message_listener", "callable", self.message_listener
        )
        for name in (
            "receiver_queue_size",
            "max_total_receiver_queue_size_across_partitions",
            "max_pending_chunked_message",
            "ack_group_max_size",
            "ack_group_time_ms",
        ):
            value = getattr(self, name)
            _check(_is_int(value) and value >= 0, name, "an int >= 0", value)
        _check(
            _is_int(self.negative_ack_redelivery_delay_ms) and self.negative_ack_redelivery_delay_ms >= 0,
            "negative_ack_redelivery_delay_ms", "an int >= 0", self.negative_ack_redelivery_delay_ms,
        )
        _check(
            _is_int(self.pattern_auto_discovery_period) and self.pattern_auto_discovery_period > 0,
            "pattern_auto_discovery_period", "an int > 0", self.pattern_auto_discovery_period,
        )
        if self.unacked_messages_timeout_ms is not None:
            from .unacked_tracker import MIN_ACK_TIMEOUT_MS

            _check(
                _is_int(self.unacked_messages_timeout_ms)
                and (self.unacked_messages_timeout_ms == 0 or self.unacked_messages_timeout_ms >= MIN_ACK_TIMEOUT_MS),
                "unacked_messages_timeout_ms", f"None, 0 or an int >= {MIN_ACK_TIMEOUT_MS}", self.unacked_messages_timeout_ms,
            )
        _check(self.consumer_name is None or isinstance(self.consumer_name, str), "consumer_name", "a str or None", self.consumer_name)
        _check(self.properties is None or isinstance(self.properties, dict), "properties", "a dict or None", self.properties)
        for name in (
            "is_read_compacted",
            "auto_ack_oldest_chunked_message_on_queue_full",
            "start_message_id_inclusive",
            "batch_index_ack_enabled",
            "ack_receipt_enabled",
        ):
            _check(isinstance(getattr(self, name), bool), name, "a bool", getattr(self, name))
        _check(
            self.batch_receive_policy is None or isinstance(self.batch_receive_policy, ConsumerBatchReceivePolicy),
            "batch_receive_policy", "a ConsumerBatchReceivePolicy or None", self.batch_receive_policy,
        )
        _check(
            self.key_shared_policy is None or isinstance(self.key_shared_policy, ConsumerKeySharedPolicy),
            "key_shared_policy", "a ConsumerKeySharedPolicy or None", self.key_shared_policy,
        )
        if self.dead_letter_policy is not None:
            from .dead_letter import ConsumerDeadLetterPolicy

            _check(
                isinstance(self.dead_letter_policy, ConsumerDeadLetterPolicy),
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


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check(ok: bool, name: str, expected: str, value: Any) -> None:
    if not ok:
        raise InvalidConfiguration(f"{name} must be {expected}, got {value!r}")


def _enum(kind: type[enum.IntEnum], value: Any, name: str) -> Any:
    # Also accepts the official client's enum members, so settings carry over unchanged.
    try:
        return kind(int(value))
    except (TypeError, ValueError):
        raise InvalidConfiguration(f"{name} must be a {kind.__name__}, got {value!r}") from None
