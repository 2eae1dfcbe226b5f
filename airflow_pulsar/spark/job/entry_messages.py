"""The messages of received entries as Arrow columns: batch index, key, value, event time, properties.

A range reader takes whole entries (``Consumer.take_entries``); their messages become table rows
without a Message object, a protobuf object or a Python step per message where that can be done
exactly.

Batches whose every SingleMessageMetadata has the layout producers write (properties, partition
key, payload size, event time, sequence id, each at most once and in field-number order, with
one-byte lengths for the texts) are read together, many messages at a time with numpy
(:class:`_CommonBatches`): each field is read for every message at once, and the texts and values
are cut out of the entries' bytes by Arrow. Where each message starts is found without walking
the batch: every place two zero bytes begin (a metadata size under 65,536 begins so) is read as if
a message began there, and a batch counts only if the messages read at its start, then after each
message, tile it exactly with its count of messages. That layout parses to one meaning only, so
reading it this way gives what protobuf gives; anything else in an entry (another field, a null
value, compaction's mark, an ack_set or start filter, text that is not UTF-8, a malformed batch)
sends the entry the exact way: split by the client's ``read_batch`` and each message's fields read
off its parsed metadata. ``tests/unit/test_entry_messages.py`` compares the two on every layout it
can make.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Sequence
from typing import NamedTuple, Protocol

import numpy as np
import pyarrow as pa

from airflow_pulsar.client.consumer import ReceivedEntry
from airflow_pulsar.client.consumer.message import text
from airflow_pulsar.client.protocol.batch import BatchFormatError, read_batch
from airflow_pulsar.client.protocol.PulsarApi_pb2 import KeyValue, SingleMessageMetadata
from airflow_pulsar.client.protocol.wire import tag

log = logging.getLogger(__name__)


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
    keys: Sequence[str],
    values: Sequence[bytes | None],
    event_times: Sequence[int],
    property_counts: Sequence[int],
    property_keys: Sequence[str],
    property_values: Sequence[str],
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
    malformed batch's up to the fault, which is logged)."""
    parts: list[MessageColumns] = []
    counts: list[int] = []
    _read_runs(entries, [bool(entry.batch_size) and entry.wanted is None for entry in entries], parts, counts)
    rows = np.zeros(len(entries) + 1, np.int64)
    np.cumsum(counts, out=rows[1:])
    return EntryColumns(MessageColumns.concat(parts), rows)


def _read_runs(entries: Sequence[ReceivedEntry], common: Sequence[bool], parts: list[MessageColumns], counts: list[int]) -> None:
    """Each run of entries that may have the common layout read together, every other the exact way."""
    start = 0
    for is_common, run in itertools.groupby(common):
        stop = start + len(list(run))
        (_read_common_run if is_common else _read_exactly)(entries[start:stop], parts, counts)
        start = stop


def _read_common_run(entries: Sequence[ReceivedEntry], parts: list[MessageColumns], counts: list[int]) -> None:
    """Batches that may have the common layout: read together, each that has not the exact way."""
    batches = _CommonBatches(entries)
    if not batches.good.all():  # the good ones are read together again: rare
        _read_runs(entries, batches.good.tolist(), parts, counts)
        return
    try:
        parts.append(batches.columns())
    except pa.ArrowInvalid:  # a text that is not UTF-8
        _read_exactly(entries, parts, counts)
    else:
        counts += [entry.batch_size for entry in entries]


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


def _read_exactly(entries: Sequence[ReceivedEntry], parts: list[MessageColumns], counts: list[int]) -> None:
    columns: tuple[list, list, list, list, list, list, list] = ([], [], [], [], [], [], [])
    indexes, keys, values, event_times, property_counts, property_keys, property_values = columns
    for entry in entries:
        if not entry.batch_size:
            messages: list[tuple[int, bytes, _FieldsSource]] = [(-1, entry.payload, entry.metadata)]
        else:
            messages = []
            try:
                read_batch(entry.payload, entry.batch_size, _message_parts, None, entry.wanted, messages)
            except BatchFormatError as exc:
                log.error("discarding the rest of batch %d:%d: %s", entry.ledger_id, entry.entry_id, exc)
        for index, payload, source in messages:
            indexes.append(index)
            keys.append(source.partition_key)
            values.append(None if source.null_value else payload)
            event_times.append(source.event_time)
            properties = source.properties
            for pair in properties:
                property_keys.append(pair.key)
                property_values.append(pair.value)
            property_counts.append(len(properties))
        counts.append(len(messages))
    parts.append(message_columns(*columns))


# ---- the common layout, many messages at a time ----


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
# Read in place of a field's key where there is no more metadata: no key is 0.
_NO_FIELD = 0


class _CommonBatches:
    """Batch payloads read together as the common layout. ``good`` marks the entries that have it;
    :meth:`columns` gives their messages (all must be good).

    Positions are int64 numpy arrays into the entries' bytes laid side by side. A "head" is a
    place a message may start; its fields are read for every head at once, and ``ok`` marks the
    heads whose bytes read as a message of the common layout.
    """

    def __init__(self, entries: Sequence[ReceivedEntry]) -> None:
        joined = b"".join(entry.payload for entry in entries)
        self.buffer = pa.py_buffer(joined)
        self.size = len(joined)
        self.data = np.frombuffer(joined + b"\x00", np.uint8)  # reads past the end are clamped to this 0
        lengths = np.fromiter((len(entry.payload) for entry in entries), np.int64, len(entries))
        bounds = np.zeros(len(entries) + 1, np.int64)
        np.cumsum(lengths, out=bounds[1:])
        self.starts, self.ends = bounds[:-1], bounds[1:]
        self.counts = np.fromiter((entry.batch_size for entry in entries), np.int64, len(entries))
        self.good = np.zeros(len(entries), bool)
        if self.size < 2**31:  # int32 offsets for the columns cut out of the bytes
            self._read()

    def _at(self, at: np.ndarray) -> np.ndarray:
        """The byte at each position (0 past the end)."""
        return self.data[np.minimum(at, self.size)]

    def _field(self, at: np.ndarray, limit: np.ndarray) -> np.ndarray:
        """The field key at each position, or _NO_FIELD where the metadata ended (``limit``)."""
        return np.where(at < limit, self._at(at), _NO_FIELD)

    def _varint(self, at: np.ndarray, limit: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The protobuf varint at each position: (values as uint64, where each ends, whether each is
        a varint of at most 64 bits ending by ``limit``). Byte k is read only where byte k-1 said
        more follows."""
        byte = self._at(at)
        values = (byte & 0x7F).astype(np.uint64)
        length = np.ones(len(at), np.int64)
        valid = np.ones(len(at), bool)
        more = np.flatnonzero(byte & 0x80)
        for shift in range(7, 70, 7):
            if not more.size:
                break
            byte = self._at(at[more] + length[more])
            if shift == 63:  # the tenth byte holds the 64th bit only
                valid[more[(byte & 0x7E) != 0]] = False
            values[more] |= (byte & 0x7F).astype(np.uint64) << np.uint64(shift)
            length[more] += 1
            more = more[(byte & 0x80) != 0]
        valid[more] = False  # more after ten bytes
        end = at + length
        return values, end, valid & (end <= limit)

    def _read(self) -> None:
        data, starts = self.data, self.starts
        zeros = np.flatnonzero(data[: self.size] == 0)
        heads = np.concatenate([zeros[data[zeros + 1] == 0], starts])
        heads.sort()
        heads = heads[np.concatenate([[True], heads[1:] != heads[:-1]])]
        owner = np.searchsorted(starts, heads, "right") - 1
        ok = (self._at(heads) == 0) & (self._at(heads + 1) == 0)
        meta_end = heads + 4 + (self._at(heads + 2).astype(np.int64) << 8 | self._at(heads + 3))
        ok &= meta_end <= self.ends[owner]
        at = heads + 4

        # Properties: a KeyValue of a one-byte key and value, as often as each message has them.
        rounds: list[tuple[np.ndarray, ...]] = []
        reading = np.flatnonzero(ok & (self._field(at, meta_end) == _PROPERTY))
        while reading.size:
            begin, limit = at[reading], meta_end[reading]
            pair_end = begin + 2 + self._at(begin + 1)
            key_end = begin + 4 + self._at(begin + 3)
            value_length = self._at(key_end + 1)
            fits = (
                (self._at(begin + 1) < 0x80) & (self._at(begin + 2) == _PAIR_KEY) & (self._at(begin + 3) < 0x80)
                & (self._at(key_end) == _PAIR_VALUE) & (value_length < 0x80) & (key_end + 2 + value_length == pair_end)
                & (pair_end <= limit)
            )
            ok[reading[~fits]] = False
            reading, begin, key_end, pair_end = reading[fits], begin[fits], key_end[fits], pair_end[fits]
            rounds.append((reading, begin + 4, key_end, key_end + 2, pair_end))
            at[reading] = pair_end
            reading = reading[self._field(pair_end, meta_end[reading]) == _PROPERTY]

        keyed = self._field(at, meta_end) == _PARTITION_KEY
        key_length = self._at(at + 1)
        ok &= ~keyed | (key_length < 0x80)
        key_start = np.where(keyed, at + 2, at)
        at = key_end = np.where(keyed, at + 2 + key_length, at)

        ok &= self._field(at, meta_end) == _PAYLOAD_SIZE
        size, at, valid = self._varint(at + 1, meta_end)
        ok &= valid & (size < 2**31)
        timed = self._field(at, meta_end) == _EVENT_TIME
        event_time, after, valid = self._varint(at + 1, meta_end)
        ok &= ~timed | valid
        event_time = np.where(timed, event_time, np.uint64(0))
        at = np.where(timed, after, at)
        sequenced = self._field(at, meta_end) == _SEQUENCE_ID  # last: its varint ends the metadata, in up to nine bytes
        _, after, valid = self._varint(at + 1, meta_end)
        ok &= ~sequenced | (valid & (after - at - 1 <= 9))
        at = np.where(sequenced, after, at)
        ok &= at == meta_end
        following = meta_end + size.astype(np.int64)
        ok &= following <= self.ends[owner]

        # The messages: the heads that are an entry's start or follow a message read. A batch
        # is good if they tile it, start to end, in its count of messages.
        reached = np.zeros(self.size + 1, bool)
        reached[starts] = True
        reached[following[ok]] = True
        member = np.flatnonzero(ok & reached[heads])
        found, links = owner[member], following[member]
        good = np.bincount(found, minlength=len(starts)) == self.counts
        first = np.ones(len(member), bool)
        first[1:] = found[1:] != found[:-1]
        last = np.ones(len(member), bool)
        last[:-1] = first[1:]
        broken = first & (heads[member] != starts[found])
        broken |= last & (links != self.ends[found])
        broken[:-1] |= ~last[:-1] & (links[:-1] != heads[member][1:])
        good[found[broken]] = False
        self.good = good

        # What columns() cuts out, for the messages of good batches (row by row).
        member = member[good[found]]
        self._rows = len(member)
        self._owner = owner[member]
        self._keys = (key_start[member], key_end[member])
        self._values = (meta_end[member], following[member])
        self._event_times = event_time[member]
        row_of = np.full(len(heads), -1, np.int64)
        row_of[member] = np.arange(len(member))
        rows = [row_of[round_[0]] for round_ in rounds]
        kept = [row >= 0 for row in rows]
        pair_rows = np.concatenate([row[k] for row, k in zip(rows, kept, strict=True)]) if rounds else np.empty(0, np.int64)
        order = np.argsort(pair_rows, kind="stable")  # message by message, each message's pairs in order
        self._property_counts = np.bincount(pair_rows, minlength=len(member))
        self._pairs = [
            np.concatenate([round_[field][k] for round_, k in zip(rounds, kept, strict=True)])[order] if rounds else np.empty(0, np.int64)
            for field in range(1, 5)
        ]

    def columns(self) -> MessageColumns:
        """The messages of the batches, which must all be good."""
        first_row = np.zeros(len(self.starts), np.int64)
        np.cumsum(self.counts[:-1], out=first_row[1:])
        key_start, key_end, value_start, value_end = self._pairs
        return MessageColumns(
            (np.arange(self._rows) - first_row[self._owner]).astype(np.int32),
            _as_text(self._cut(*self._keys)),
            self._cut(*self._values),
            self._event_times,
            self._property_counts,
            _as_text(self._cut(key_start, key_end)),
            _as_text(self._cut(value_start, value_end)),
        )

    def _cut(self, starts: np.ndarray, ends: np.ndarray) -> pa.Array:
        """The bytes from each start to its end, as a binary array; the spans are in order and apart."""
        if not len(starts):
            return pa.array([], pa.binary())
        bounds = np.empty(2 * len(starts), np.int32)
        bounds[0::2], bounds[1::2] = starts, ends
        # Every span and every gap between two spans is an element; the spans are the even ones.
        spans = pa.Array.from_buffers(pa.binary(), len(bounds) - 1, [None, pa.py_buffer(bounds), self.buffer])
        return spans.take(pa.array(np.arange(0, len(bounds), 2)))
