"""The messages of received entries as Arrow columns: batch index, key, value, event time, properties.

A range reader takes whole entries (``Consumer.take_entries``); the client's columnar batch reader
(``airflow_pulsar.client.entries.read_columns``) gives their messages as plain Python columns,
which become Arrow and numpy arrays here without a Message object or a Python step per message:
spans of the entries' bytes are cut out by Arrow, buffers are taken as they are, and lists (the
messages the client read one by one) are converted by Arrow and numpy, in C.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from airflow_pulsar.client.entries import MessageLists, MessageSpans, ReceivedEntry, read_columns, text


class MessageColumns(NamedTuple):
    """Messages, column by column: batch index (-1 for an entry that is one message), partition
    key ("" for none), value (null for a null value), event time (0 for none), and properties
    flattened in order, with each message's count of them."""

    indexes: np.ndarray  # int32
    keys: pa.Array  # string
    values: pa.Array  # binary
    event_times: np.ndarray  # uint64
    property_counts: np.ndarray  # int64
    property_keys: pa.Array  # string
    property_values: pa.Array  # string

    def slice(self, start: int, stop: int) -> MessageColumns:
        """Messages ``start`` to ``stop - 1``."""
        if start == 0 and stop == len(self.indexes):
            return self
        counts = self.property_counts
        first = int(counts[:start].sum())
        last = first + int(counts[start:stop].sum())
        return MessageColumns(
            self.indexes[start:stop], self.keys[start:stop], self.values[start:stop], self.event_times[start:stop],
            counts[start:stop], self.property_keys[first:last], self.property_values[first:last],
        )

    @staticmethod
    def concat(parts: Sequence[MessageColumns]) -> MessageColumns:
        """The messages of ``parts``, one part after the other (none: no messages)."""
        if not parts:
            return message_columns(*[[]] * 7)
        if len(parts) == 1:
            return parts[0]
        return MessageColumns(*(
            np.concatenate(columns) if isinstance(columns[0], np.ndarray) else pa.concat_arrays(columns)
            for columns in zip(*parts, strict=True)
        ))


def message_columns(
    indexes: Sequence[int],
    keys: Sequence[str | bytes],
    values: Sequence[bytes | None],
    event_times: Sequence[int],
    property_counts: Sequence[int],
    property_keys: Sequence[str | bytes],
    property_values: Sequence[str | bytes],
) -> MessageColumns:
    """The columns of messages given as Python lists (converted by Arrow and numpy, in C)."""
    return MessageColumns(
        np.array(indexes, np.int32),
        _strings(keys),
        pa.array(values, pa.binary()),
        np.array(event_times, np.uint64),
        np.array(property_counts, np.int64),
        _strings(property_keys),
        _strings(property_values),
    )


def _strings(values: Sequence[str | bytes]) -> pa.Array:
    """A string column of metadata text; protobuf gives the bytes of text that is not UTF-8
    (proto2 does not check), which reads as the consumer's :func:`text` reads it."""
    try:
        return pa.array(values, pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([text(value) for value in values], pa.string())


def _as_text(values: pa.Array) -> pa.Array:
    """A binary column of metadata text as strings, read as :func:`_strings` reads them."""
    try:
        return values.cast(pa.string())
    except pa.ArrowInvalid:  # rare: a producer sent bytes that are not UTF-8
        return _strings(values.to_pylist())


def _span_columns(spans: MessageSpans) -> MessageColumns:
    """The columns of messages the client read many at a time, its buffers taken as they are."""
    data = pa.py_buffer(spans.data)
    return MessageColumns(
        np.frombuffer(spans.indexes, np.int32),
        _as_text(_cut(data, spans.keys)),
        _cut(data, spans.values),
        np.frombuffer(spans.event_times, np.uint64),
        np.frombuffer(spans.property_counts, np.int64),
        _as_text(_cut(data, spans.property_keys)),
        _as_text(_cut(data, spans.property_values)),
    )


def _cut(data: pa.Buffer, bounds: memoryview) -> pa.Array:
    """The spans ``bounds`` of ``data`` as a binary array."""
    if not len(bounds):
        return pa.array([], pa.binary())
    # Read as offsets, the bounds make every span and every gap between two an element; the spans are the even ones.
    spans = pa.Array.from_buffers(pa.binary(), len(bounds) - 1, [None, pa.py_buffer(bounds), data])
    return spans.take(pa.array(np.arange(0, len(bounds), 2)))


class EntryColumns(NamedTuple):
    """The messages of a list of entries, and where each entry's messages lie: entry ``i`` holds
    messages ``rows[i]`` to ``rows[i + 1] - 1`` (none, where compaction or a filter left none)."""

    messages: MessageColumns
    rows: np.ndarray  # int64, one more than the entries

    def first_index(self, entry: int) -> int:
        """The batch index of entry ``entry``'s first message (it must have one)."""
        return int(self.messages.indexes[self.rows[entry]])

    def select(self, start: int, stop: int) -> EntryColumns:
        """The messages of entries ``start`` to ``stop - 1``."""
        rows = self.rows[start : stop + 1]
        return EntryColumns(self.messages.slice(int(rows[0]), int(rows[-1])), rows - rows[0])


def entry_columns(entries: Sequence[ReceivedEntry]) -> EntryColumns:
    """The messages of ``entries`` (a batch's that ``entry.wanted`` keeps and compaction left; a
    malformed batch's up to the fault, which the client logs), read by the client's columnar reader."""
    parts: list[MessageColumns] = []
    counts: list[int] = []
    for run in read_columns(entries):
        messages = run.messages
        parts.append(message_columns(*messages) if isinstance(messages, MessageLists) else _span_columns(messages))
        counts += run.counts
    rows = np.zeros(len(entries) + 1, np.int64)
    np.cumsum(counts, out=rows[1:])
    return EntryColumns(MessageColumns.concat(parts), rows)
