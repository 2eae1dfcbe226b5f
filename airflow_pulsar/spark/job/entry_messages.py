"""The messages of a received entry as columns: batch index, key, value, event time, properties.

A range reader takes whole entries (``Consumer.take_entries``); their messages become table rows
without a Message object or a protobuf object per message where that can be done exactly.

A batch whose every SingleMessageMetadata has the layout producers write (properties, partition
key, payload size, event time, sequence id, each at most once and in field-number order, with
one-byte lengths) is read off the bytes in one pass (:func:`_read_common_batch`). That layout
parses to one meaning only, so reading it by hand gives what protobuf gives; anything else in an
entry (another field, a null value, compaction's mark, an ack_set or start filter, text that is
not UTF-8, a malformed batch) sends the whole entry the exact way: split by the client's
``read_batch`` and each message's fields read off its parsed metadata.
``tests/unit/test_entry_messages.py`` compares the two on every layout it can make.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Sequence
from typing import NamedTuple, Protocol

from airflow_pulsar.client.consumer import ReceivedEntry
from airflow_pulsar.client.protocol.PulsarApi_pb2 import KeyValue, SingleMessageMetadata
from airflow_pulsar.client.protocol.wire import BatchFormatError, read_batch, tag

log = logging.getLogger(__name__)


class EntryMessages(NamedTuple):
    """The messages of one entry, column by column: batch index (-1 for an entry that is one
    message), partition key ("" for none), value (None for a null value), event time (0 for
    none), and properties flattened in order, with each message's count of them."""

    indexes: list[int]
    keys: list[str]
    values: list[bytes | None]
    event_times: list[int]
    property_counts: list[int]
    property_keys: list[str]
    property_values: list[str]


def entry_messages(entry: ReceivedEntry) -> EntryMessages:
    """The messages of a received entry (a batch's that ``entry.wanted`` keeps and compaction
    left; a malformed batch's up to the fault, which is logged)."""
    if entry.batch_size and entry.wanted is None:
        try:
            return _read_common_batch(entry.payload, entry.batch_size)
        except (_Uncommon, IndexError, struct.error, UnicodeDecodeError):
            pass  # read exactly below
    return _read_exactly(entry)


# ---- the exact way: protobuf objects ----


class _FieldsSource(Protocol):
    """Where a message's own fields are read: its SingleMessageMetadata in a batch, else the entry's MessageMetadata."""

    partition_key: str
    null_value: bool
    event_time: int

    @property
    def properties(self) -> Sequence[KeyValue]: ...


# The metadata of a message in a batch that read_batch left as bytes: only a payload size and a
# sequence id, so no key, properties or event time (protobuf defaults, shared).
_PLAIN_SINGLE = SingleMessageMetadata()


def _message_parts(_: None, index: int, payload: bytes, single: bytes | SingleMessageMetadata) -> tuple[int, bytes, _FieldsSource]:
    return index, payload, single if isinstance(single, SingleMessageMetadata) else _PLAIN_SINGLE


def _read_exactly(entry: ReceivedEntry) -> EntryMessages:
    if not entry.batch_size:
        parts: list[tuple[int, bytes, _FieldsSource]] = [(-1, entry.payload, entry.metadata)]
    else:
        parts = []
        try:
            read_batch(entry.payload, entry.batch_size, _message_parts, None, entry.wanted, parts)
        except BatchFormatError as exc:
            log.error("discarding the rest of batch %d:%d: %s", entry.ledger_id, entry.entry_id, exc)
    messages = EntryMessages([], [], [], [], [], [], [])
    for index, payload, source in parts:
        messages.indexes.append(index)
        messages.keys.append(source.partition_key)
        messages.values.append(None if source.null_value else payload)
        messages.event_times.append(source.event_time)
        properties = source.properties
        for pair in properties:
            messages.property_keys.append(pair.key)
            messages.property_values.append(pair.value)
        messages.property_counts.append(len(properties))
    return messages


# ---- the common layout, read off the bytes ----


class _Uncommon(Exception):
    """The batch holds something the common layout does not cover."""


def _key(message: type[SingleMessageMetadata] | type[KeyValue], field: str) -> int:
    (key,) = tag(message, field)  # every field read here has a one-byte key
    return key


_PROPERTY = _key(SingleMessageMetadata, "properties")
_PARTITION_KEY = _key(SingleMessageMetadata, "partition_key")
_PAYLOAD_SIZE = _key(SingleMessageMetadata, "payload_size")
_EVENT_TIME = _key(SingleMessageMetadata, "event_time")
_SEQUENCE_ID = _key(SingleMessageMetadata, "sequence_id")
_PAIR_KEY = _key(KeyValue, "key")
_PAIR_VALUE = _key(KeyValue, "value")
_SIZE = struct.Struct(">I").unpack_from
# A separator that cannot be inside a string joined with it, once checked absent: strings are decoded together.
_SEPARATOR = b"\x00"


def _read_common_batch(buf: bytes, count: int) -> EntryMessages:
    """The messages of a batch payload of the common layout; raises _Uncommon (or IndexError,
    struct.error, UnicodeDecodeError) for any other."""
    keys: list[bytes] = []
    values: list[bytes | None] = []
    event_times: list[int] = []
    property_counts: list[int] = []
    pairs: list[bytes] = []  # key, value, key, value, ...
    pos, end = 0, len(buf)
    for _ in range(count):
        (meta_size,) = _SIZE(buf, pos)
        meta_end = pos + 4 + meta_size
        meta = buf[pos + 4 : meta_end]
        if len(meta) != meta_size:
            raise _Uncommon
        at = properties = 0
        field = meta[0]
        while field == _PROPERTY:  # KeyValue: key, then value, one-byte lengths
            pair_end = at + 2 + meta[at + 1]
            key_end = at + 4 + meta[at + 3]
            if meta[at + 1] >= 0x80 or meta[at + 2] != _PAIR_KEY or meta[at + 3] >= 0x80 or meta[key_end] != _PAIR_VALUE:
                raise _Uncommon
            if key_end + 2 + meta[key_end + 1] != pair_end or meta[key_end + 1] >= 0x80:
                raise _Uncommon
            pairs += (meta[at + 4 : key_end], meta[key_end + 2 : pair_end])
            properties += 1
            at = pair_end
            field = meta[at]
        if field == _PARTITION_KEY:
            key_end = at + 2 + meta[at + 1]
            if meta[at + 1] >= 0x80:
                raise _Uncommon
            keys.append(meta[at + 2 : key_end])
            at = key_end
            field = meta[at]
        else:
            keys.append(b"")
        if field != _PAYLOAD_SIZE:
            raise _Uncommon
        size = meta[at + 1]
        if size < 0x80:  # a payload under 128 bytes: its size is one byte
            at += 2
        else:
            size, at = _varint(meta, at + 1)
        event_time = 0
        if at < meta_size and meta[at] == _EVENT_TIME:
            event_time, at = _varint(meta, at + 1)
        if at < meta_size and meta[at] == _SEQUENCE_ID:  # last: its varint runs to the end, in up to nine bytes
            sequence_id = meta[at + 1 :]
            if not 0 < len(sequence_id) <= 9 or sequence_id[-1] >= 0x80 or min(sequence_id[:-1] or b"\x80") < 0x80:
                raise _Uncommon
            at = meta_size
        pos = meta_end + size
        if at != meta_size or size >= 1 << 31 or pos > end:
            raise _Uncommon
        values.append(buf[meta_end:pos])
        event_times.append(event_time)
        property_counts.append(properties)
    if pos != end:
        raise _Uncommon
    texts = _decode(keys + pairs)
    return EntryMessages(
        list(range(count)), texts[:count], values, event_times, property_counts, texts[count::2], texts[count + 1 :: 2]
    )


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """(the varint at ``at``, where it ends); at most ten bytes, as protobuf reads them."""
    value = shift = 0
    while True:
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at += 1
        if byte < 0x80:
            if value >> 64:  # past 64 bits: left to protobuf
                raise _Uncommon
            return value, at
        shift += 7
        if shift >= 70:
            raise _Uncommon


def _decode(texts: list[bytes]) -> list[str]:
    """UTF-8 strings, decoded in one call when the separator is in none of them."""
    joined = _SEPARATOR.join(texts)
    if texts and joined.count(_SEPARATOR) == len(texts) - 1:
        return joined.decode("utf-8").split(_SEPARATOR.decode())
    return [text.decode("utf-8") for text in texts]
