"""The broker's subscription cursor: mark-delete, individual and batch-index acks, persistence."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from airflow_pulsar.broker.cursor import NO_ENTRY, Cursor
from airflow_pulsar.client.protocol.batch import ack_set_words, unacked_mask


def ack_words(acked_indexes: set[int], size: int) -> list[int]:
    """The ack_set a client sends: bits set for every index it has not acknowledged."""
    return ack_set_words(sum(1 << i for i in range(size) if i not in acked_indexes), size)


def snapshot(cursor: Cursor) -> tuple:
    return (cursor.name, cursor.durable, cursor.mark_delete, set(cursor.acked), dict(cursor.batch_unacked))


# ------------------------------------------------------------------------- individual acks


def test_new_cursor():
    cursor = Cursor("sub", durable=True)
    assert cursor.mark_delete == NO_ENTRY == -1
    assert not cursor.is_acked(0)
    assert cursor.is_acked(-1)
    assert cursor.unacked_bits(0) is None
    assert Cursor("sub", False, mark_delete=9).is_acked(9)


def test_in_order_acks_move_the_mark_delete():
    cursor = Cursor("sub", True)
    for entry in range(5):
        assert cursor.ack(entry)
        assert cursor.mark_delete == entry
        assert cursor.acked == set()


def test_mark_delete_advances_over_individually_acked_entries():
    cursor = Cursor("sub", True)
    assert cursor.ack(2)
    assert cursor.ack(3)
    assert cursor.ack(5)
    assert cursor.mark_delete == -1
    assert cursor.acked == {2, 3, 5}
    assert [cursor.is_acked(e) for e in range(7)] == [False, False, True, True, False, True, False]
    assert cursor.ack(0)
    assert cursor.mark_delete == 0 and cursor.acked == {2, 3, 5}
    # Acking the hole folds 2 and 3 into the mark-delete; 5 stays individual behind the hole at 4.
    assert cursor.ack(1)
    assert cursor.mark_delete == 3
    assert cursor.acked == {5}
    assert cursor.ack(4)
    assert cursor.mark_delete == 5 and cursor.acked == set()


def test_repeated_and_old_acks_change_nothing():
    cursor = Cursor("sub", True, mark_delete=10)
    assert not cursor.ack(3)
    assert not cursor.ack(10)
    assert cursor.ack(12)
    assert not cursor.ack(12)
    assert (cursor.mark_delete, cursor.acked) == (10, {12})


# ------------------------------------------------------------------------ batch-index acks


def test_batch_index_acks_with_set_bits_meaning_unacknowledged():
    cursor = Cursor("sub", True)
    # As the official client sends them: ack index 1 of 3, then 0, then 2.
    assert cursor.ack_batch_indexes(0, [0b101], 3)
    assert cursor.unacked_bits(0) == 0b101
    assert not cursor.is_acked(0)
    assert cursor.ack_batch_indexes(0, [0b110], 3)
    assert cursor.unacked_bits(0) == 0b100
    assert cursor.mark_delete == -1
    assert cursor.ack_batch_indexes(0, [0b011], 3)
    assert cursor.is_acked(0)
    assert cursor.unacked_bits(0) is None
    assert cursor.mark_delete == 0
    assert cursor.batch_unacked == {}


def test_batch_index_ack_that_adds_nothing_reports_no_change():
    cursor = Cursor("sub", True)
    assert cursor.ack_batch_indexes(4, [0b1110], 4)
    assert not cursor.ack_batch_indexes(4, [0b1110], 4)
    assert not cursor.ack_batch_indexes(4, [0b1111], 4)  # acks nothing new
    assert cursor.unacked_bits(4) == 0b1110


def test_acks_combine_regardless_of_order():
    cursor = Cursor("sub", True)
    assert cursor.ack_batch_indexes(1, ack_words({3}, 8), 8)
    assert cursor.ack_batch_indexes(1, ack_words({0, 7}, 8), 8)
    assert cursor.unacked_bits(1) == 0b0111_0110
    # A client that lost its own state re-sends an older, wider ack_set; nothing is unacknowledged again.
    assert not cursor.ack_batch_indexes(1, ack_words(set(), 8), 8)
    assert cursor.unacked_bits(1) == 0b0111_0110


def test_batch_index_acks_across_several_words():
    size = 130
    cursor = Cursor("sub", True)
    assert cursor.ack_batch_indexes(0, ack_words({63}, size), size)
    words = ack_set_words(cursor.unacked_bits(0), size)
    assert words[0] == 2**63 - 1  # sign bit (index 63) cleared
    assert cursor.ack_batch_indexes(0, ack_words({64, 129}, size), size)
    assert cursor.unacked_bits(0) == (2**130 - 1) & ~(1 << 63 | 1 << 64 | 1 << 129)
    assert ack_set_words(cursor.unacked_bits(0), size) == [2**63 - 1, -2, 1]
    rest = set(range(size)) - {63, 64, 129}
    assert cursor.ack_batch_indexes(0, ack_words(rest, size), size)
    assert cursor.is_acked(0) and cursor.mark_delete == 0


def test_negative_words_from_the_wire():
    # Word -2 (all bits but bit 0) acks only index 0 of a 64-message batch.
    cursor = Cursor("sub", True)
    assert cursor.ack_batch_indexes(0, [-2], 64)
    assert cursor.unacked_bits(0) == 2**64 - 2
    assert cursor.ack_batch_indexes(0, [1], 64)
    assert cursor.is_acked(0)


def test_bits_past_the_batch_size_are_ignored():
    cursor = Cursor("sub", True)
    assert cursor.ack_batch_indexes(0, [0b1111_0101], 3)  # bits 3..7 do not exist in a batch of 3
    assert cursor.unacked_bits(0) == 0b101


def test_batch_index_ack_of_an_acked_entry_is_ignored():
    cursor = Cursor("sub", True, mark_delete=5)
    assert not cursor.ack_batch_indexes(5, [0b10], 2)
    assert cursor.ack(8)
    assert not cursor.ack_batch_indexes(8, [0b10], 2)
    assert cursor.batch_unacked == {}


def test_whole_entry_ack_clears_its_batch_state():
    cursor = Cursor("sub", True)
    assert cursor.ack_batch_indexes(3, [0b10], 2)
    assert cursor.ack(3)
    assert cursor.unacked_bits(3) is None
    assert cursor.acked == {3}


def test_partial_batch_ack_blocks_the_mark_delete():
    cursor = Cursor("sub", True)
    assert cursor.ack_batch_indexes(0, [0b10], 2)
    assert cursor.ack(1)
    assert cursor.mark_delete == -1
    assert cursor.ack_batch_indexes(0, [0b01], 2)
    assert cursor.mark_delete == 1
    assert cursor.acked == set() and cursor.batch_unacked == {}


def test_unknown_batch_size_keeps_the_remaining_bits():
    # Clients do not always send batch_size (the official C++ client leaves it out).
    cursor = Cursor("sub", True)
    assert cursor.ack_batch_indexes(2, [0b101], 0)
    assert cursor.unacked_bits(2) == 0b101
    assert cursor.ack_batch_indexes(2, [0b110], 0)
    assert cursor.unacked_bits(2) == 0b100
    assert not cursor.is_acked(2)


# -------------------------------------------------------------------------- cumulative acks


def test_cumulative_ack_prunes_everything_up_to_it():
    cursor = Cursor("sub", True)
    for entry in (2, 4, 9):
        cursor.ack(entry)
    cursor.ack_batch_indexes(3, [0b10], 2)
    cursor.ack_batch_indexes(8, [0b10], 2)
    assert cursor.ack_cumulative(5)
    assert cursor.mark_delete == 5
    assert cursor.acked == {9}
    assert cursor.batch_unacked == {8: 0b10}


def test_cumulative_ack_folds_following_individual_acks():
    cursor = Cursor("sub", True)
    for entry in (4, 5, 7):
        cursor.ack(entry)
    assert cursor.ack_cumulative(3)
    assert cursor.mark_delete == 5
    assert cursor.acked == {7}


def test_cumulative_ack_at_or_below_the_mark_delete_changes_nothing():
    cursor = Cursor("sub", True, mark_delete=10)
    cursor.ack(12)
    assert not cursor.ack_cumulative(10)
    assert not cursor.ack_cumulative(-1)
    assert (cursor.mark_delete, cursor.acked) == (10, {12})


def test_reset_forgets_everything_after_the_new_position():
    cursor = Cursor("sub", True)
    cursor.ack_cumulative(10)
    cursor.ack(12)
    cursor.ack_batch_indexes(14, [1], 2)
    cursor.reset(3)
    assert cursor.mark_delete == 3
    assert cursor.acked == set() and cursor.batch_unacked == {}
    assert not cursor.is_acked(4) and not cursor.is_acked(12)
    cursor.reset(-1)
    assert not cursor.is_acked(0)


# ------------------------------------------------------------------------------ persistence


def test_state_round_trip_through_json():
    cursor = Cursor("sub", True)
    cursor.ack(0)
    cursor.ack(5)
    cursor.ack(3)
    cursor.ack_batch_indexes(7, ack_words({1}, 200), 200)
    cursor.ack_batch_indexes(9, [0b110], 3)
    state = cursor.state()
    assert state == {
        "mark_delete": 0,
        "acked": [3, 5],
        "batch": {"7": (2**200 - 1) & ~0b10, "9": 0b110},
    }
    restored = Cursor.from_state("sub", json.loads(json.dumps(state)))
    assert snapshot(restored) == snapshot(cursor)
    assert restored.durable
    # The restored cursor keeps working.
    assert restored.ack_batch_indexes(9, [0b001], 3)
    assert restored.is_acked(9)


def test_state_of_a_fresh_cursor():
    state = Cursor("s", True, mark_delete=4).state()
    assert state == {"mark_delete": 4, "acked": [], "batch": {}}
    assert snapshot(Cursor.from_state("s", state)) == ("s", True, 4, set(), {})


# ------------------------------------------------------------------- model-based comparison


class CursorAgainstModel(RuleBasedStateMachine):
    """Drive a cursor with random acks and compare with a set of acknowledged (entry, index) pairs."""

    @initialize(sizes=st.lists(st.integers(1, 130), min_size=1, max_size=8))
    def start(self, sizes):
        self.sizes = sizes
        self.cursor = Cursor("sub", True)
        self.model: set[tuple[int, int]] = set()

    # ---- the model ----

    def fully_acked(self, entry: int) -> bool:
        return all((entry, i) in self.model for i in range(self.sizes[entry]))

    def acked_indexes(self, entry: int) -> set[int]:
        return {i for e, i in self.model if e == entry}

    def ack_pairs(self, pairs: set[tuple[int, int]]) -> bool:
        changed = not pairs <= self.model
        self.model |= pairs
        return changed

    def model_mark_delete(self) -> int:
        mark = -1
        while mark + 1 < len(self.sizes) and self.fully_acked(mark + 1):
            mark += 1
        return mark

    def entries(self):
        return st.integers(0, len(self.sizes) - 1)

    # ---- rules ----

    @rule(data=st.data())
    def ack(self, data):
        entry = data.draw(self.entries())
        expected = self.ack_pairs({(entry, i) for i in range(self.sizes[entry])})
        assert self.cursor.ack(entry) == expected

    @rule(data=st.data())
    def ack_batch_indexes(self, data):
        entry = data.draw(self.entries())
        size = self.sizes[entry]
        indexes = data.draw(st.sets(st.integers(0, size - 1), max_size=size))
        words = ack_words(indexes, size)
        # Bits past the batch inside the last word must not matter.
        spare = 64 * len(words) - size
        if spare and data.draw(st.booleans()):
            junk = data.draw(st.integers(1, 2**spare - 1)) << size
            words = ack_set_words(unacked_mask(words) | junk, 64 * len(words))
        expected = self.ack_pairs({(entry, i) for i in indexes})
        assert self.cursor.ack_batch_indexes(entry, words, size) == expected

    @rule(data=st.data())
    def ack_cumulative(self, data):
        entry = data.draw(self.entries())
        expected = self.ack_pairs({(e, i) for e in range(entry + 1) for i in range(self.sizes[e])})
        assert self.cursor.ack_cumulative(entry) == expected

    @rule(data=st.data())
    def reset(self, data):
        mark = data.draw(st.integers(-1, len(self.sizes) - 1))
        self.cursor.reset(mark)
        self.model = {(e, i) for e in range(mark + 1) for i in range(self.sizes[e])}

    @precondition(lambda self: hasattr(self, "cursor"))
    @rule()
    def persist_and_restore(self):
        state = json.loads(json.dumps(self.cursor.state()))
        restored = Cursor.from_state("sub", state)
        assert snapshot(restored) == snapshot(self.cursor)
        self.cursor = restored

    # ---- invariants ----

    @invariant()
    def agrees_with_the_model(self):
        if not hasattr(self, "cursor"):
            return
        cursor = self.cursor
        mark = self.model_mark_delete()
        assert cursor.mark_delete == mark
        for entry, size in enumerate(self.sizes):
            done = self.acked_indexes(entry)
            assert cursor.is_acked(entry) == (len(done) == size), entry
            expected_bits = sum(1 << i for i in range(size) if i not in done)
            if 0 < len(done) < size:
                assert cursor.unacked_bits(entry) == expected_bits, entry
            else:
                assert cursor.unacked_bits(entry) is None, entry
        # Individually acked entries are exactly the fully acked ones past the mark-delete.
        assert cursor.acked == {e for e in range(mark + 1, len(self.sizes)) if self.fully_acked(e)}
        assert set(cursor.batch_unacked) == {
            e for e in range(len(self.sizes)) if 0 < len(self.acked_indexes(e)) < self.sizes[e]
        }
        assert not cursor.is_acked(len(self.sizes))


CursorAgainstModel.TestCase.settings = settings(max_examples=150, stateful_step_count=30, deadline=None)
TestCursorAgainstModel = CursorAgainstModel.TestCase


@settings(max_examples=100, deadline=None)
@given(st.permutations(range(12)))
def test_any_ack_order_ends_with_everything_acked(order):
    cursor = Cursor("sub", True)
    for count, entry in enumerate(order, 1):
        assert cursor.ack(entry)
        acked = set(order[:count])
        mark = -1
        while mark + 1 in acked:
            mark += 1
        assert cursor.mark_delete == mark
        assert cursor.acked == {e for e in acked if e > mark}
    assert cursor.mark_delete == 11 and cursor.acked == set()


@pytest.mark.parametrize("size", [1, 2, 63, 64, 65, 128, 129])
def test_acking_every_index_one_by_one_acks_the_entry(size):
    cursor = Cursor("sub", True)
    done: set[int] = set()
    for index in reversed(range(size)):
        done.add(index)
        assert cursor.ack_batch_indexes(0, ack_words(done, size), size)
        assert cursor.is_acked(0) == (len(done) == size)
    assert cursor.mark_delete == 0


def test_unknown_batch_size_completes_when_no_bit_is_left() -> None:
    # The official client acks batch indexes without batch_size.
    cursor = Cursor("sub", True)
    assert cursor.ack_batch_indexes(0, [0b100], 0)
    assert cursor.ack_batch_indexes(0, [0b011], 0)
    assert cursor.is_acked(0) and cursor.mark_delete == 0
