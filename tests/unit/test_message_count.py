"""Counting a backlog in messages from internal stats and broker entry indexes (no broker).

The internal stats shapes are those Apache Pulsar 4.2.4 returns (the integration tests check both
brokers produce them): positions ``"ledger:entry"``, deleted ranges ``"[(3:1..3:4],(3:6..3:7]]"``.
"""

from __future__ import annotations

import httpx
import pytest

from airflow_pulsar.client.message_count import (
    CountError,
    CursorState,
    EntryIndex,
    Position,
    decode_entry_index,
    estimate_messages,
    index_at,
    lookup_position,
    parse_deleted_ranges,
)


def internal_stats(last: str, mark_delete: str, deleted: str = "[]", added: int = 11) -> dict:
    return {
        "entriesAddedCounter": added,
        "lastConfirmedEntry": last,
        "cursors": {"s": {"markDeletePosition": mark_delete, "individuallyDeletedMessages": deleted}},
    }


def test_positions_and_ranges_read_as_pulsar_prints_them() -> None:
    assert Position.parse("3:10") == Position(3, 10) and str(Position.parse(" 3:-1 ")) == "3:-1"
    assert Position(3, 10) < Position(4, -1)
    assert parse_deleted_ranges("[]") == []
    assert parse_deleted_ranges("[(3:1..3:4],(3:6..3:7]]") == [
        (Position(3, 1), Position(3, 4)),
        (Position(3, 6), Position(3, 7)),
    ]
    # Older brokers separate ranges with ", "; ranges may span ledgers.
    assert parse_deleted_ranges("[(3:1..3:4], (3:10..5:0]]")[1] == (Position(3, 10), Position(5, 0))


@pytest.mark.parametrize(
    ("text", "error"),
    [("3", "expected a position"), ("a:b", "expected a position"), (None, "expected a position")],
)
def test_bad_positions_are_refused(text: object, error: str) -> None:
    with pytest.raises(CountError, match=error):
        Position.parse(text)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "error"),
    [("(3:1..3:4]", "expected individuallyDeletedMessages"), ("[3:1-3:4]", "cannot read"), ("[(3:5..3:4]]", "ends before")],
)
def test_bad_ranges_are_refused(text: str, error: str) -> None:
    with pytest.raises(CountError, match=error):
        parse_deleted_ranges(text)


def test_exact_count_from_indexes() -> None:
    # 100 messages in batches of 10 on entries 0..9, one more on entry 10: index(e) = 10e + 9, index(10) = 100.
    index = {Position(3, e): 10 * e + 9 for e in range(10)} | {Position(3, 10): 100}
    cursor = CursorState.from_internal_stats(internal_stats("3:10", "3:-1", "[(3:1..3:4],(3:6..3:7]]"), "s")
    assert cursor is not None
    needed = cursor.positions_needed()
    assert needed == [Position(3, 10), Position(3, -1), Position(3, 4), Position(3, 1), Position(3, 7), Position(3, 6)]
    values = {}
    for position in needed:
        target = lookup_position(position)
        values[position] = index_at(position, EntryIndex(index[target], 10 if target.entry_id < 10 else 1))
    assert values[Position(3, -1)] == -1  # entry 0's index less its 10 messages
    assert cursor.exact_messages(values) == 101 - 30 - 10


def test_the_entry_after_a_position_stands_in_for_it_where_it_exists() -> None:
    """index(p) = index(p + 1) - messages(p + 1): the entry after a mark-delete is the oldest
    unacknowledged one, and where it is the last confirmed entry one lookup serves both."""
    last = Position(3, 10)
    assert lookup_position(Position(3, 9), last) == last
    assert lookup_position(Position(3, 4), last) == Position(3, 5)
    assert lookup_position(last, last) == last
    assert lookup_position(Position(2, 7), last) == Position(2, 7)  # an older ledger may end there
    assert lookup_position(Position(2, -1), last) == Position(2, 0)
    index = {Position(3, e): 10 * e + 9 for e in range(10)} | {Position(3, 10): 100}
    cursor = CursorState.from_internal_stats(internal_stats("3:10", "3:-1", "[(3:1..3:4],(3:6..3:7]]"), "s")
    assert cursor is not None and cursor.first_unacknowledged() == Position(3, 0)
    values = {}
    for position in cursor.positions_needed():
        target = lookup_position(position, cursor.last_confirmed)
        values[position] = index_at(position, EntryIndex(index[target], 10 if target.entry_id < 10 else 1), target)
    assert cursor.exact_messages(values) == 101 - 30 - 10  # as with each position looked up itself
    one_left = CursorState.from_internal_stats(internal_stats("3:10", "3:9"), "s")
    assert one_left is not None and one_left.first_unacknowledged() == last
    assert {lookup_position(p, last) for p in one_left.positions_needed()} == {last}
    older = CursorState.from_internal_stats(internal_stats("3:10", "2:7"), "s")
    assert older is not None and older.first_unacknowledged() is None


def test_no_cursor_for_the_subscription() -> None:
    assert CursorState.from_internal_stats(internal_stats("3:10", "3:-1"), "other") is None


def test_entry_headers_give_index_and_message_count() -> None:
    batched = httpx.Response(200, headers={"X-Pulsar-Broker-Entry-METADATA-index": "59", "X-Pulsar-num-batch-message": "10"})
    assert decode_entry_index(batched) == EntryIndex(59, 10)
    assert decode_entry_index(httpx.Response(200)) == EntryIndex(None, 1)
    assert index_at(Position(3, 5), EntryIndex(None, 10)) is None
    with pytest.raises(CountError, match="unreadable entry headers"):
        decode_entry_index(httpx.Response(200, headers={"X-Pulsar-Broker-Entry-METADATA-index": "x"}))


def test_estimates() -> None:
    assert estimate_messages(7, messages_in=101, entries_added=11, sampled=[]) == 64
    # Counters reset by a topic reload: the sampled entries' average, never below one per entry.
    assert estimate_messages(7, messages_in=0, entries_added=0, sampled=[EntryIndex(None, 10), EntryIndex(None, 1)]) == 38
    assert estimate_messages(7, messages_in=0, entries_added=0, sampled=[]) == 7
    assert estimate_messages(0, messages_in=101, entries_added=11, sampled=[]) == 0
