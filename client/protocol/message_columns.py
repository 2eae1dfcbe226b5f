"""What a columnar read of entries gives: the messages of consecutive entries, column by column.

Columns are plain Python: lists, or buffers (``memoryview``) with the layout Arrow and numpy take
without a copy, over one ``bytes`` of the entries' payloads. The client itself needs neither numpy
nor pyarrow to give them (see :func:`.columnar.read_columns`).
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

from .PulsarApi_pb2 import MessageMetadata


class Entry(Protocol):
    """An entry opened for reading, as ``Consumer.take_entries`` gives it (a ``ReceivedEntry``):
    decompressed, not split into messages. ``batch_size`` is 0 for an entry that is one message;
    a batch leaves out the indexes whose bit is clear in ``wanted``, unless it is None."""

    @property
    def ledger_id(self) -> int: ...

    @property
    def entry_id(self) -> int: ...

    @property
    def metadata(self) -> MessageMetadata: ...

    @property
    def payload(self) -> bytes: ...

    @property
    def batch_size(self) -> int: ...

    @property
    def wanted(self) -> int | None: ...


class MessageLists(NamedTuple):
    """Messages read one by one (protobuf), column by column as lists: batch index (-1 for an entry
    that is one message), partition key ("" for none), value (None for a null value), event time
    (0 for none), and properties flattened in order, with each message's count of them.

    Texts (keys, property keys and values) are ``str`` as protobuf reads them, or the raw ``bytes``
    where a producer sent text that is not UTF-8 (proto2 does not check): read those with
    ``airflow_pulsar.client.entries.text``.
    """

    indexes: list[int]
    keys: list[str | bytes]
    values: list[bytes | None]
    event_times: list[int]
    property_counts: list[int]
    property_keys: list[str | bytes]
    property_values: list[str | bytes]


class MessageSpans(NamedTuple):
    """Messages read many at a time, with the same columns as :class:`MessageLists` (no value is
    null here), as buffers: ``indexes`` int32, ``event_times`` uint64, ``property_counts`` int64.

    A column of byte strings is spans of ``data`` (the entries' payloads, end to end): int32
    bounds, each string's start then its end, in order and apart or adjacent. Read as the offsets
    of an Arrow binary array over ``data``, they give each string at an even position (the odd
    ones are the gaps between them). Texts are the UTF-8 bytes the producer sent, which may not be
    UTF-8 after all: read those with ``airflow_pulsar.client.entries.text``.
    """

    data: bytes
    indexes: memoryview
    keys: memoryview
    values: memoryview
    event_times: memoryview
    property_counts: memoryview
    property_keys: memoryview
    property_values: memoryview

    def strings(self, bounds: memoryview) -> list[bytes]:
        """The byte strings of a column of spans, as Python bytes (one object each)."""
        data = self.data
        ends = bounds.tolist()
        return [data[start:end] for start, end in zip(ends[0::2], ends[1::2], strict=True)]


class RunColumns(NamedTuple):
    """The messages of a run of consecutive entries read the same way: ``counts[i]`` is how many
    the run's ``i``-th entry gives (0 where compaction or a filter left none), ``messages`` their
    columns, entry after entry. The entries' own fields (ledger and entry id, publish time,
    redelivery count, schema version) are read off the entries."""

    counts: list[int]
    messages: MessageLists | MessageSpans
