"""Avro binary datums decoded into Arrow arrays many messages at a time, with no Python object per field.

The payloads of a batch of messages lie side by side in one byte buffer. Decoding keeps one
cursor per message (a position in that buffer) and walks the schema once: each field is read for
every message at once with numpy (a varint for all cursors, a gather of all strings' bytes), and
the cursors move on together. Unions read only their chosen branch per message; array and map
blocks are read an item per cursor per round, so rounds grow with the longest array, not with
the number of messages.

A message whose bytes run out (or that holds an impossible length, branch or count) is marked
bad; its cursor stops at its end, and what is read for it is garbage the caller discards. A
message whose datum ends before its payload does is bad too.

Strings come out as binary (the caller casts them to UTF-8 after discarding bad rows), enums as
strings, the logical types as their Arrow types; general unions as a struct of one child per
non-null branch (``member0``, ...), null where another branch was chosen.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .avro_types import NULL, TIMESTAMPS, Avro, logical, union_branches, widened

# Bytes past the last payload, so that reads of up to this many bytes at any cursor stay in the buffer.
_PAD = 16
# A block of zero-size items (an array of nulls) may not claim more items than this beyond its message's bytes.
_ZERO_SIZE_ITEMS = 1 << 16
_SIZES = {NULL: 0, "boolean": 1, "int": 1, "long": 1, "float": 4, "double": 8, "bytes": 1, "string": 1}

Cursors = np.ndarray  # int64 positions in the buffer (or indices of messages: ``owner``)


def decode_datums(payloads: pa.BinaryArray, schema: Avro) -> tuple[pa.Array, np.ndarray]:
    """Each payload (none may be null) read as one datum of ``schema``: (values, bad), where ``bad``
    marks the payloads that are not one whole datum."""
    datums = _Datums(payloads)
    owner = np.arange(len(payloads), dtype=np.int64)
    values, end = datums.read(schema, datums.starts.copy(), owner)
    datums.bad |= end != datums.ends
    return values, datums.bad


class _Datums:
    """The payloads in one buffer, where each starts and ends, and which are bad."""

    def __init__(self, payloads: pa.BinaryArray) -> None:
        count = len(payloads)
        _, offsets_buffer, data_buffer = payloads.buffers()
        offsets = np.frombuffer(offsets_buffer, np.int32)[payloads.offset : payloads.offset + count + 1].astype(np.int64)
        size = int(offsets[-1]) if count else 0
        data = np.frombuffer(data_buffer, np.uint8)[:size] if data_buffer is not None else np.empty(0, np.uint8)
        self.data = np.concatenate([data, np.zeros(_PAD, np.uint8)])
        self.starts, self.ends = offsets[:-1], offsets[1:]
        self.bad = np.zeros(count, bool)

    # ---- cursors ----

    def _advance(self, after: Cursors, owner: Cursors, invalid: np.ndarray | None = None) -> Cursors:
        """Cursors moved to ``after``; those past their message's end (or ``invalid``) mark it bad and stop at its end."""
        ends = self.ends[owner]
        over = after > ends
        if invalid is not None:
            over |= invalid
        if over.any():
            self.bad[owner[over]] = True
            after = np.where(over, ends, after)
        return after

    def _fixed(self, pos: Cursors, owner: Cursors, size: int) -> tuple[np.ndarray, Cursors]:
        """``size`` bytes at each cursor, one row each."""
        index = np.minimum(pos[:, None] + np.arange(size), len(self.data) - 1)
        return self.data[index], self._advance(pos + size, owner)

    def _varints(self, pos: Cursors, owner: Cursors) -> tuple[np.ndarray, Cursors]:
        """Avro's zig-zag varint at each cursor, as int64. Byte k is read only for the cursors whose
        byte k-1 said more follows: small numbers, the most common, cost one pass."""
        byte = self.data[pos]
        raw = (byte & 0x7F).astype(np.uint64)
        length = np.ones(len(pos), np.int64)
        longer = np.flatnonzero(byte & 0x80)
        for shift in range(7, 70, 7):
            if not longer.size:
                break
            byte = self.data[pos[longer] + length[longer]]
            raw[longer] |= (byte & 0x7F).astype(np.uint64) << np.uint64(shift)
            length[longer] += 1
            longer = longer[(byte & 0x80) != 0]
        invalid = np.zeros(len(pos), bool)
        invalid[longer] = True  # still more after ten bytes: not a varint
        values = (raw >> np.uint64(1)).astype(np.int64) ^ -(raw & np.uint64(1)).astype(np.int64)
        return values, self._advance(pos + length, owner, invalid if longer.size else None)

    # ---- types ----

    def read(self, schema: Avro, pos: Cursors, owner: Cursors) -> tuple[pa.Array, Cursors]:
        """One datum of ``schema`` at each cursor: the values and the cursors after them."""
        if isinstance(schema, list):
            return self._union(schema, pos, owner)
        if isinstance(schema, dict):
            return self._complex(schema, pos, owner)
        count = len(pos)
        if schema == NULL:
            return pa.nulls(count), pos
        if schema == "boolean":
            return pa.array(self.data[pos] != 0, pa.bool_()), self._advance(pos + 1, owner)
        if schema in ("int", "long"):
            values, pos = self._varints(pos, owner)
            return pa.array(values.astype(np.int32) if schema == "int" else values), pos
        if schema in ("float", "double"):
            width = 4 if schema == "float" else 8
            raw, pos = self._fixed(pos, owner, width)
            return pa.array(raw.view(f"<f{width}").reshape(count)), pos
        if schema in ("bytes", "string"):
            return self._bytes(pos, owner)
        raise ValueError(f"cannot decode the Avro type {schema!r}")

    def _complex(self, schema: dict, pos: Cursors, owner: Cursors) -> tuple[pa.Array, Cursors]:
        kind = schema["type"]
        if kind == "record":
            children, names = [], []
            for field in schema["fields"]:
                child, pos = self.read(field["type"], pos, owner)
                children.append(child)
                names.append(field["name"])
            return pa.StructArray.from_arrays(children, names=names) if children else pa.nulls(len(pos), pa.struct([])), pos
        if kind == "enum":
            symbols = schema["symbols"]
            index, after = self._varints(pos, owner)
            invalid = (index < 0) | (index >= len(symbols))
            index = np.where(invalid, 0, index)
            return pa.array(symbols, pa.string()).take(pa.array(index)), self._advance(after, owner, invalid)
        if kind == "fixed":
            raw, pos = self._fixed(pos, owner, schema["size"])
            values = pa.FixedSizeBinaryArray.from_buffers(pa.binary(schema["size"]), len(raw), [None, pa.py_buffer(raw.tobytes())])
            return _logical(values.cast(pa.binary()), schema), pos
        if kind in ("array", "map"):
            return self._blocks(schema, pos, owner)
        values, pos = self.read(kind, pos, owner)
        return _logical(values, schema), pos

    def _bytes(self, pos: Cursors, owner: Cursors) -> tuple[pa.Array, Cursors]:
        lengths, pos = self._varints(pos, owner)
        invalid = (lengths < 0) | (lengths > self.ends[owner] - pos)
        if invalid.any():
            self.bad[owner[invalid]] = True
            lengths = np.where(invalid, 0, lengths)
        offsets = np.zeros(len(pos) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        total = int(offsets[-1])
        # Every byte of every value, gathered in one go: value i's bytes start at pos[i].
        gathered = self.data[np.repeat(pos - offsets[:-1], lengths) + np.arange(total)]
        kind, width = (pa.binary(), np.int32) if total < 2**31 else (pa.large_binary(), np.int64)
        values = pa.Array.from_buffers(kind, len(pos), [None, pa.py_buffer(offsets.astype(width)), pa.py_buffer(gathered)])
        return values, pos + lengths

    def _union(self, union: list[Avro], pos: Cursors, owner: Cursors) -> tuple[pa.Array, Cursors]:
        count = len(pos)
        branch, after = self._varints(pos, owner)
        invalid = (branch < 0) | (branch >= len(union))
        if invalid.any():
            self.bad[owner[invalid]] = True
            branch = np.where(invalid, union.index(NULL) if NULL in union else 0, branch)
        chosen: list[tuple[np.ndarray, pa.Array]] = []
        for index, schema in enumerate(union):
            if schema == NULL:
                continue
            rows = np.flatnonzero(branch == index)
            values, after[rows] = self.read(schema, after[rows], owner[rows])
            chosen.append((rows, values))
        if len(chosen) == 1:
            return scatter(count, *chosen[0]), after
        wide = widened(union)
        if wide is not None:
            kind = pa.int64() if wide == "long" else pa.float64()
            return interleave(count, [(rows, values.cast(kind)) for rows, values in chosen], kind), after
        members = [scatter(count, rows, values) for rows, values in chosen]
        names = [f"member{i}" for i in range(len(union_branches(union)))]
        return pa.StructArray.from_arrays(members, names=names, mask=pa.array(np.isin(branch, _null_branches(union)))), after

    def _blocks(self, schema: dict, pos: Cursors, owner: Cursors) -> tuple[pa.Array, Cursors]:
        """An array or a map: blocks of items, each block a count (negative: followed by its byte size)."""
        # A map's items are (key, value) records.
        map_entry = {
            "type": "record",
            "name": "entry",
            "fields": [{"name": "key", "type": "string"}, {"name": "value", "type": schema.get("values")}],
        }
        item: Avro = schema["items"] if schema["type"] == "array" else map_entry
        item_size = _min_size(item)
        count = len(pos)
        pos = pos.copy()
        items = np.zeros(count, np.int64)
        left = np.zeros(count, np.int64)  # items left in each cursor's current block
        reading = np.arange(count)
        rounds: list[pa.Array] = []
        readers: list[np.ndarray] = []
        while reading.size:
            starting = reading[left[reading] == 0]
            if starting.size:
                blocks, after = self._varints(pos[starting], owner[starting])
                sized = blocks < 0
                if sized.any():  # a negative count is followed by the block's size in bytes
                    blocks = np.abs(blocks)
                    _, after[sized] = self._varints(after[sized], owner[starting][sized])
                room = np.maximum(self.ends[owner[starting]] - after, 0)
                limit = room // item_size if item_size else room + _ZERO_SIZE_ITEMS
                invalid = blocks > limit
                if invalid.any():
                    self.bad[owner[starting][invalid]] = True
                    blocks = np.where(invalid, 0, blocks)
                pos[starting], left[starting] = after, blocks
                reading = reading[left[reading] > 0]  # a block of 0 items ends the array
                if not reading.size:
                    break
            values, pos[reading] = self.read(item, pos[reading], owner[reading])
            rounds.append(values)
            readers.append(reading)
            items[reading] += 1
            left[reading] -= 1
        # Rounds hold each reader's items in order: a stable sort by reader puts each list together.
        order = np.argsort(np.concatenate(readers), kind="stable") if readers else np.empty(0, np.int64)
        none = np.empty(0, np.int64)
        values = pa.concat_arrays(rounds).take(pa.array(order)) if rounds else self.read(item, none, none)[0]
        offsets = pa.array(np.concatenate([[0], np.cumsum(items)]).astype(np.int32))
        if schema["type"] == "array":
            return pa.ListArray.from_arrays(offsets, values), pos
        return pa.MapArray.from_arrays(offsets, values.field("key"), values.field("value")), pos


def scatter(count: int, rows: np.ndarray, values: pa.Array) -> pa.Array:
    """An array of ``count`` rows holding ``values`` at ``rows`` (in order) and null elsewhere."""
    if len(rows) == count:
        return values
    index = np.full(count, -1, np.int64)
    index[rows] = np.arange(len(rows))
    return values.take(pa.array(index, mask=index < 0))


def interleave(count: int, parts: list[tuple[np.ndarray, pa.Array]], kind: pa.DataType) -> pa.Array:
    """``count`` rows, each part's values at its rows, null where no part has a row."""
    if len(parts) == 1:
        return scatter(count, *parts[0])
    index = np.full(count, -1, np.int64)
    start = 0
    for rows, values in parts:
        index[rows] = np.arange(start, start + len(values))
        start += len(values)
    values = pa.concat_arrays([values for _, values in parts]) if parts else pa.array([], kind)
    return values.take(pa.array(index, mask=index < 0))


def _null_branches(union: list[Avro]) -> list[int]:
    return [index for index, schema in enumerate(union) if schema == NULL]


def _min_size(schema: Avro) -> int:
    """The fewest bytes a datum of ``schema`` takes."""
    if isinstance(schema, list):
        return 1
    if isinstance(schema, str):
        return _SIZES.get(schema, 0)
    kind = schema["type"]
    if kind == "record":
        return sum(_min_size(field["type"]) for field in schema["fields"])
    if kind == "fixed":
        return int(schema["size"])
    if kind in ("enum", "array", "map"):
        return 1
    return _min_size(kind)


def _logical(values: pa.Array, schema: dict) -> pa.Array:
    """Values of a type with a logical type, as that logical type's Arrow type."""
    name = logical(schema)
    if name == "date" and values.type == pa.int32():
        return values.cast(pa.date32())
    if name in TIMESTAMPS and values.type == pa.int64():
        unit, utc = TIMESTAMPS[name]
        return values.cast(pa.timestamp(unit, tz="UTC" if utc else None))
    if name == "decimal" and pa.types.is_binary(values.type):
        return _decimals(values, int(schema["precision"]), int(schema.get("scale", 0)))
    return values


def _decimals(values: pa.BinaryArray, precision: int, scale: int) -> pa.Array:
    """Big-endian two's-complement unscaled values (Avro's decimal) as decimal128, 16 little-endian bytes each."""
    count = len(values)
    _, offsets_buffer, data_buffer = values.buffers()
    offsets = np.frombuffer(offsets_buffer, np.int32)[values.offset : values.offset + count + 1].astype(np.int64)
    data = np.concatenate(
        [np.frombuffer(data_buffer, np.uint8) if data_buffer is not None else np.empty(0, np.uint8), np.zeros(1, np.uint8)]
    )
    starts, lengths = offsets[:-1], np.minimum(np.diff(offsets), 16)
    little = np.arange(16)
    present = little < lengths[:, None]
    # Byte k of the little-endian word is byte (length - 1 - k) of the big-endian value.
    source = np.where(present, starts[:, None] + lengths[:, None] - 1 - little, 0)
    negative = (lengths > 0) & (data[starts] >= 0x80)
    words = np.where(present, data[source], np.where(negative[:, None], 0xFF, 0)).astype(np.uint8)
    return pa.Array.from_buffers(pa.decimal128(precision, scale), count, [None, pa.py_buffer(words.tobytes())])
