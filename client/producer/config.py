"""Producer settings: the official ``create_producer`` keyword names, validated once.

Every setting defaults as in ``pulsar.Client.create_producer`` except ``batching_enabled``, which
is on here (the official sync API turns it off; ours is the primary path and batches) unless
``chunking_enabled`` is set, since the two cannot be on together. ``None`` means "not set", so 0
can mean 0. A bad argument raises ``ValueError`` naming it, as the official wrapper does.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..arguments import check, check_type, to_enum
from ..crypto import KeyReader
from ..protocol.compression import CompressionType
from ..protocol.PulsarApi_pb2 import Schema as SchemaPb
from ..schema import BytesSchema, KeyValueEncodingType, KeyValueSchema, Schema
from .routers import HashingScheme, PartitionsRoutingMode

__all__ = ["BatchingType", "ProducerAccessMode", "ProducerConfig"]


class ProducerAccessMode(enum.IntEnum):
    """Who may produce on a topic; values are the wire's ``ProducerAccessMode``."""

    Shared = 0
    Exclusive = 1
    WaitForExclusive = 2
    ExclusiveWithFencing = 3


class BatchingType(enum.IntEnum):
    """How messages are grouped into batches: ``Default`` in arrival order, one batch for all;
    ``KeyBased`` one batch per key, for Key_Shared subscriptions."""

    Default = 0
    KeyBased = 1


@dataclass(frozen=True)
class ProducerConfig:
    """Validated producer settings; build with :meth:`from_settings`."""

    producer_name: str | None = None
    # Encodes what ``send`` takes; declared on PRODUCER when the broker keeps its type.
    schema: Schema[Any] = field(default_factory=BytesSchema)
    initial_sequence_id: int | None = None
    send_timeout_millis: int = 30_000
    compression_type: CompressionType = CompressionType.NONE
    max_pending_messages: int = 1000
    max_pending_messages_across_partitions: int = 50_000
    block_if_queue_full: bool = False
    batching_enabled: bool = True
    batching_max_messages: int = 1000
    batching_max_allowed_size_in_bytes: int = 131_072
    batching_max_publish_delay_ms: int = 10
    batching_partition_switch_frequency_by_publish_delay: int = 10
    batching_type: BatchingType = BatchingType.Default
    # The key names the data key is wrapped for (official: one str; a list wraps it for each).
    encryption_key: tuple[str, ...] = ()
    crypto_key_reader: KeyReader | None = None
    message_routing_mode: PartitionsRoutingMode = PartitionsRoutingMode.RoundRobinDistribution
    hashing_scheme: HashingScheme = HashingScheme.JavaStringHash
    message_router: Callable[[Any, int], int] | None = None
    skip_full_partitions: bool = False
    chunking_enabled: bool = False
    # Accepted for the official signature; every partition producer starts when the producer does.
    lazy_start_partitioned_producers: bool = False
    access_mode: ProducerAccessMode = ProducerAccessMode.Shared
    properties: Mapping[str, str] = field(default_factory=dict)
    interceptors: Sequence[Any] = ()
    stats_log_interval_seconds: float | None = None

    @classmethod
    def from_settings(cls, **settings: Any) -> ProducerConfig:
        """Check every keyword (name, type, range) and fill the defaults; raise naming the bad one."""
        known = cls.__dataclass_fields__
        unknown = sorted(set(settings) - set(known))
        if unknown:
            raise TypeError(f"create_producer() got unexpected keyword argument(s): {', '.join(unknown)}")
        values = {k: v for k, v in settings.items() if v is not None}
        for name in (
            "batching_enabled",
            "block_if_queue_full",
            "chunking_enabled",
            "skip_full_partitions",
            "lazy_start_partitioned_producers",
        ):
            if name in values:
                check_type(bool, values[name], name)
        for name in ("send_timeout_millis", "batching_max_publish_delay_ms", "initial_sequence_id"):
            _check_int(values, name, minimum=0)
        for name in (
            "max_pending_messages",
            "max_pending_messages_across_partitions",
            "batching_max_messages",
            "batching_max_allowed_size_in_bytes",
            "batching_partition_switch_frequency_by_publish_delay",
        ):
            _check_int(values, name, minimum=1)
        if "schema" in values:
            check(isinstance(values["schema"], Schema), "schema", "a Schema (airflow_pulsar.client.schema)", values["schema"])
        if "producer_name" in values:
            check_type(str, values["producer_name"], "producer_name")
        for name, kind in (
            ("compression_type", CompressionType),
            ("message_routing_mode", PartitionsRoutingMode),
            ("hashing_scheme", HashingScheme),
            ("access_mode", ProducerAccessMode),
            ("batching_type", BatchingType),
        ):
            if name in values:
                values[name] = to_enum(kind, values[name], name)
        router = values.get("message_router")
        check(router is None or callable(router), "message_router", "callable(message, num_partitions)", router)
        if router is not None:
            values["message_routing_mode"] = PartitionsRoutingMode.CustomPartition
        elif values.get("message_routing_mode") == PartitionsRoutingMode.CustomPartition:
            raise ValueError("Argument message_routing_mode CustomPartition needs a message_router")
        properties = values.get("properties", {})
        check(
            isinstance(properties, Mapping) and all(isinstance(k, str) and isinstance(v, str) for k, v in properties.items()),
            "properties", "a dict of str to str", properties,
        )
        _check_encryption(values)
        interval = values.get("stats_log_interval_seconds")
        check(
            interval is None or (isinstance(interval, (int, float)) and interval > 0),
            "stats_log_interval_seconds", "a positive number", interval,
        )
        values["interceptors"] = tuple(values.get("interceptors", ()))
        if values.get("chunking_enabled"):
            # Batching is on only by our default; chunking asked for explicitly wins over it.
            if values.get("batching_enabled"):
                raise ValueError("Batching and chunking of messages can't be enabled together (batching_enabled, chunking_enabled).")
            values["batching_enabled"] = False
        config = cls(**values)
        return config

    @property
    def declared_schema(self) -> SchemaPb | None:
        """The schema PRODUCER declares; None for the types the official client does not declare (bytes)."""
        info = self.schema.schema_info()
        return info.to_proto() if info.declared_to_broker else None

    @property
    def key_value_separated(self) -> bool:
        """Whether the schema carries each message's key in the message key, base64-encoded (a
        SEPARATED key/value schema), as the Java client does."""
        schema = self.schema
        return isinstance(schema, KeyValueSchema) and schema.encoding is KeyValueEncodingType.SEPARATED

    @property
    def encrypted(self) -> bool:
        """Whether payloads are encrypted (the PRODUCER command says so to the broker)."""
        return bool(self.encryption_key)

    @property
    def send_timeout(self) -> float | None:
        """The send timeout in seconds; None when 0 turns it off."""
        return self.send_timeout_millis / 1000 if self.send_timeout_millis else None


def _check_int(values: dict[str, Any], name: str, minimum: int) -> None:
    if name in values:
        check_type(int, values[name], name)
        check(values[name] >= minimum, name, f">= {minimum}", values[name])


def _check_encryption(values: dict[str, Any]) -> None:
    names = values.get("encryption_key") or ()
    if isinstance(names, str):
        names = (names,) if names else ()  # "" means none, as in the official client
    check(
        isinstance(names, (list, tuple)) and all(isinstance(n, str) and n for n in names),
        "encryption_key", "a key name (str) or a list of them", names,
    )
    reader = values.get("crypto_key_reader")
    check(
        reader is None or isinstance(reader, KeyReader),
        "crypto_key_reader", "a CryptoKeyReader (airflow_pulsar.client) or have get_public_key and get_private_key", reader,
    )
    if names and reader is None:
        # The official client would send such messages unencrypted; refusing is the safe reading.
        raise ValueError(f"Argument encryption_key {list(names)} needs a crypto_key_reader to read the public keys from")
    values["encryption_key"] = tuple(dict.fromkeys(names))
