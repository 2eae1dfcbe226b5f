"""Producer settings as the producer uses them: the options of ``create_producer``, validated once.

The options and their defaults are declared in :class:`~airflow_pulsar.client.ProducerOptions`;
:meth:`ProducerConfig.from_options` checks each (name, type, range) and holds them in the forms
the producer reads (enum members, tuples, a schema). A bad argument raises ``ValueError``
naming it, as the official wrapper does.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
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
    """Validated producer settings; build with :meth:`from_options`."""

    producer_name: str | None
    # Encodes what ``send`` takes; declared on PRODUCER when the broker keeps its type.
    schema: Schema[Any]
    initial_sequence_id: int | None
    send_timeout_millis: int
    compression_type: CompressionType
    max_pending_messages: int
    max_pending_messages_across_partitions: int
    block_if_queue_full: bool
    batching_enabled: bool
    batching_max_messages: int
    batching_max_allowed_size_in_bytes: int
    batching_max_publish_delay_ms: int
    chunking_enabled: bool
    message_routing_mode: PartitionsRoutingMode
    lazy_start_partitioned_producers: bool
    properties: Mapping[str, str]
    batching_type: BatchingType
    # The key names the data key is wrapped for (official: one str; a list wraps it for each).
    encryption_key: tuple[str, ...]
    crypto_key_reader: KeyReader | None
    access_mode: ProducerAccessMode
    message_router: Callable[[Any, int], int] | None
    hashing_scheme: HashingScheme
    skip_full_partitions: bool
    batching_partition_switch_frequency_by_publish_delay: int
    interceptors: tuple[Any, ...]
    stats_log_interval_seconds: float | None

    @classmethod
    def from_options(cls, options: Any) -> ProducerConfig:
        """Check every option of a :class:`~airflow_pulsar.client.ProducerOptions` (type, range,
        combination) and convert it; raise naming the bad one. (Typed loosely: the options' module
        imports this one's enums and checks options with this method.)"""
        values = {option.name: getattr(options, option.name) for option in dataclasses.fields(options)}
        for name in (
            "batching_enabled",
            "block_if_queue_full",
            "chunking_enabled",
            "skip_full_partitions",
            "lazy_start_partitioned_producers",
        ):
            check_type(bool, values[name], name)
        for name in ("send_timeout_millis", "batching_max_publish_delay_ms"):
            _check_int(values[name], name, minimum=0)
        if values["initial_sequence_id"] is not None:
            _check_int(values["initial_sequence_id"], "initial_sequence_id", minimum=0)
        for name in (
            "max_pending_messages",
            "max_pending_messages_across_partitions",
            "batching_max_messages",
            "batching_max_allowed_size_in_bytes",
            "batching_partition_switch_frequency_by_publish_delay",
        ):
            _check_int(values[name], name, minimum=1)
        if values["schema"] is None:
            values["schema"] = BytesSchema()
        check(isinstance(values["schema"], Schema), "schema", "a Schema (airflow_pulsar.client.schema)", values["schema"])
        if values["producer_name"] is not None:
            check_type(str, values["producer_name"], "producer_name")
        for name, kind in (
            ("compression_type", CompressionType),
            ("message_routing_mode", PartitionsRoutingMode),
            ("hashing_scheme", HashingScheme),
            ("access_mode", ProducerAccessMode),
            ("batching_type", BatchingType),
        ):
            values[name] = to_enum(kind, values[name], name)
        router = values["message_router"]
        check(router is None or callable(router), "message_router", "callable(message, num_partitions)", router)
        if router is not None:
            values["message_routing_mode"] = PartitionsRoutingMode.CustomPartition
        elif values["message_routing_mode"] == PartitionsRoutingMode.CustomPartition:
            raise ValueError("Argument message_routing_mode CustomPartition needs a message_router")
        if values["properties"] is None:
            values["properties"] = {}
        properties = values["properties"]
        check(
            isinstance(properties, Mapping) and all(isinstance(k, str) and isinstance(v, str) for k, v in properties.items()),
            "properties", "a dict of str to str", properties,
        )
        values["encryption_key"] = _encryption_key_names(values["encryption_key"], values["crypto_key_reader"])
        interval = values["stats_log_interval_seconds"]
        check(
            interval is None or (isinstance(interval, (int, float)) and interval > 0),
            "stats_log_interval_seconds", "a positive number", interval,
        )
        values["interceptors"] = tuple(values["interceptors"])
        if values["chunking_enabled"] and values["batching_enabled"]:
            raise ValueError("Batching and chunking of messages can't be enabled together (batching_enabled, chunking_enabled).")
        return cls(**values)

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


def _check_int(value: Any, name: str, minimum: int) -> None:
    check_type(int, value, name)
    check(value >= minimum, name, f">= {minimum}", value)


def _encryption_key_names(names: Any, reader: Any) -> tuple[str, ...]:
    """The key names to wrap the data key for, each once; checked with the key reader that reads them."""
    if names is None or names == "":
        names = ()  # "" means none, as in the official client
    elif isinstance(names, str):
        names = (names,)
    check(
        isinstance(names, (list, tuple)) and all(isinstance(n, str) and n for n in names),
        "encryption_key", "a key name (str) or a list of them", names,
    )
    check(
        reader is None or isinstance(reader, KeyReader),
        "crypto_key_reader", "a CryptoKeyReader (airflow_pulsar.client) or have get_public_key and get_private_key", reader,
    )
    if names and reader is None:
        # The official client would send such messages unencrypted; refusing is the safe reading.
        raise ValueError(f"Argument encryption_key {list(names)} needs a crypto_key_reader to read the public keys from")
    return tuple(dict.fromkeys(names))
