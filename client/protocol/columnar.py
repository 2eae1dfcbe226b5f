"""The columnar batch reader: the messages of received entries as columns, without a Message
object, a protobuf object or a Python step per message where that can be done exactly.

Runs of batches that may have the layout producers write are read many messages at a time with
numpy (:mod:`.common_layout`), into :class:`~.message_columns.MessageSpans`. Anything else in an
entry (an entry that is one message, another field, a null value, compaction's mark, an ack_set
or start filter, a malformed batch), and every entry where numpy does not import (it is optional
for the client), is read the exact way: split by :func:`.batch.read_batch` and each message's
fields read off its parsed metadata, into :class:`~.message_columns.MessageLists`.
``tests/unit/test_columnar.py`` compares the two on every layout it can make.
"""

from __future__ import annotations

import functools
import itertools
import logging
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Protocol

from .batch import BatchFormatError, read_batch
from .message_columns import Entry, MessageLists, MessageSpans, RunColumns
from .PulsarApi_pb2 import KeyValue, SingleMessageMetadata

if TYPE_CHECKING:
    from .common_layout import CommonBatches

log = logging.getLogger(__name__)


def read_columns(entries: Sequence[Entry]) -> Iterator[RunColumns]:
    """The messages of ``entries``, run after run of consecutive entries, in order (a batch's that
    ``entry.wanted`` keeps and compaction left; a malformed batch's up to the fault, which is logged)."""
    common = _common_batches()
    if common is None:
        yield _read_exactly(entries)
        return
    yield from _read_runs(common, entries, [bool(entry.batch_size) and entry.wanted is None for entry in entries])


@functools.cache
def _common_batches() -> type[CommonBatches] | None:
    """The reader of the common layout, or None where numpy does not import."""
    try:
        from .common_layout import CommonBatches
    except ImportError:
        return None
    return CommonBatches


def _read_runs(common: type[CommonBatches], entries: Sequence[Entry], maybe: Sequence[bool]) -> Iterator[RunColumns]:
    """Each run of entries that may have the common layout read together, every other the exact way;
    of a run read together, the entries that have not the layout are split off and read again."""
    start = 0
    for may_be_common, run in itertools.groupby(maybe):
        stop = start + len(list(run))
        part = entries[start:stop]
        start = stop
        if not may_be_common:
            yield _read_exactly(part)
            continue
        spans, good = _read_common(common, part)
        if spans is not None:
            yield RunColumns([entry.batch_size for entry in part], spans)
        else:  # the good ones are read together again: rare
            yield from _read_runs(common, part, good)


def _read_common(common: type[CommonBatches], entries: Sequence[Entry]) -> tuple[MessageSpans | None, list[bool]]:
    """(the messages of ``entries`` if all have the common layout, else None; which have it). The
    reader's working arrays are let go here, before the caller takes the columns."""
    batches = common(entries)
    good = batches.good.tolist()
    return (batches.spans() if all(good) else None), good


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


def _read_exactly(entries: Sequence[Entry]) -> RunColumns:
    """The messages of ``entries`` read one by one, off their protobuf metadata."""
    columns = MessageLists([], [], [], [], [], [], [])
    indexes, keys, values, event_times, property_counts, property_keys, property_values = columns
    counts: list[int] = []
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
    return RunColumns(counts, columns)
