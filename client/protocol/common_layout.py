"""Batch payloads of the layout producers write, read many messages at a time with numpy.

Batches whose every SingleMessageMetadata has the layout producers write (properties, partition
key, payload size, event time, sequence id, each at most once and in field-number order, with
one-byte lengths for the texts) are read together: each field is read for every message at once,
and the texts and values are given as spans of the entries' bytes laid side by side. Where each
message starts is found without walking the batch: every place two zero bytes begin (a metadata
size under 65,536 begins so) is read as if a message began there, and a batch counts only if the
messages read at its start, then after each message, tile it exactly with its count of messages.
That layout parses to one meaning only, so reading it this way gives what protobuf gives.

numpy is optional for the client: :mod:`.columnar` imports this module only when numpy imports,
and reads every entry the exact way otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .message_columns import Entry, MessageSpans
from .PulsarApi_pb2 import KeyValue, SingleMessageMetadata
from .wire import tag


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


class CommonBatches:
    """Batch payloads read together as the common layout. ``good`` marks the entries that have it;
    :meth:`spans` gives their messages (all must be good).

    Positions are int64 numpy arrays into the entries' bytes laid side by side. A "head" is a
    place a message may start; its fields are read for every head at once, and ``ok`` marks the
    heads whose bytes read as a message of the common layout.
    """

    def __init__(self, entries: Sequence[Entry]) -> None:
        self.joined = b"".join(entry.payload for entry in entries)
        self.size = len(self.joined)
        self.data = np.frombuffer(self.joined + b"\x00", np.uint8)  # reads past the end are clamped to this 0
        lengths = np.fromiter((len(entry.payload) for entry in entries), np.int64, len(entries))
        bounds = np.zeros(len(entries) + 1, np.int64)
        np.cumsum(lengths, out=bounds[1:])
        self.starts, self.ends = bounds[:-1], bounds[1:]
        self.counts = np.fromiter((entry.batch_size for entry in entries), np.int64, len(entries))
        self.good = np.zeros(len(entries), bool)
        if self.size < 2**31:  # int32 bounds for the spans
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

        # What spans() gives, for the messages of good batches (row by row).
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

    def spans(self) -> MessageSpans:
        """The messages of the batches, which must all be good."""
        first_row = np.zeros(len(self.starts), np.int64)
        np.cumsum(self.counts[:-1], out=first_row[1:])
        key_start, key_end, value_start, value_end = self._pairs
        return MessageSpans(
            self.joined,
            (np.arange(self._rows) - first_row[self._owner]).astype(np.int32).data,
            _bounds(*self._keys),
            _bounds(*self._values),
            self._event_times.data,
            self._property_counts.astype(np.int64, copy=False).data,
            _bounds(key_start, key_end),
            _bounds(value_start, value_end),
        )


def _bounds(starts: np.ndarray, ends: np.ndarray) -> memoryview:
    """Spans as :class:`MessageSpans` gives them: each start, then its end, as int32."""
    bounds = np.empty(2 * len(starts), np.int32)
    bounds[0::2], bounds[1::2] = starts, ends
    return bounds.data
