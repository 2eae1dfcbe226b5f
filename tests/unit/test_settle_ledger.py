"""SettleLedger: what a restarted run-acknowledging watcher makes of its settle topic's records,
as it replays them (the watcher's I/O runs on both brokers in tests/airflow/test_run_acknowledgement.py)."""

from __future__ import annotations

from airflow_pulsar.client import MessageId
from airflow_pulsar.triggers.settle_ledger import SettleLedger

A, B, C = ("orders-partition-0", "(1,0,0,-1)"), ("orders-partition-0", "(1,1,0,-1)"), ("orders-partition-1", "(2,0,1,-1)")
TIMEOUT, START = 600.0, 10_000.0


def _entry(index: int) -> MessageId:
    return MessageId(-1, 7, index, -1)


def test_fired_keys_are_held_until_their_run_settles_them_and_then_acknowledged_or_fired_anew() -> None:
    ledger = SettleLedger(TIMEOUT, START)
    assert ledger.fired(_entry(0), [A, B], at=START - 60) == []
    assert ledger.fired(_entry(1), [C], at=START - 30) == []
    assert [ledger.disposition(key, START) for key in (A, B, C)] == ["hold", "hold", "hold"]
    assert ledger.disposition(("orders-partition-0", "(9,9,0,-1)"), START) == "fire"  # never fired

    # A's and B's run succeeded while the watcher was down; C's failed.
    assert ledger.noticed(_entry(2), "acknowledge", [A, B]) == [A, B]
    assert ledger.noticed(_entry(3), "release", [C]) == [C]
    assert [ledger.disposition(key, START) for key in (A, B, C)] == ["acknowledge", "acknowledge", "fire"]

    # Each entry is acknowledged once every key it waits for is settled.
    assert sorted(ledger.forget(C)) == [_entry(1), _entry(3)]
    assert ledger.forget(A) == []
    assert sorted(ledger.forget(B)) == [_entry(0), _entry(2)]
    assert ledger.in_flight() == 0 and ledger.next_expiry() is None


def test_a_notice_for_keys_not_in_flight_waits_for_nothing_and_a_late_notice_does_not_settle_a_new_fire() -> None:
    ledger = SettleLedger(TIMEOUT, START)
    assert ledger.noticed(_entry(0), "acknowledge", [A]) == []  # settled before: nothing to do
    ledger.fired(_entry(1), [A], at=START)
    ledger.noticed(_entry(2), "release", [A])
    # A fired anew: its earlier records no longer keep it, and the old run's second word changes nothing.
    assert sorted(ledger.fired(_entry(3), [A], at=START + 5)) == [_entry(1), _entry(2)]
    assert ledger.outcome(A) is None
    assert ledger.noticed(_entry(4), "acknowledge", [A, A]) == [A]
    assert ledger.noticed(_entry(5), "release", [A]) == []
    assert ledger.outcome(A) == "acknowledge"


def test_an_unsettled_key_fires_anew_ack_timeout_after_its_fired_record_and_an_acknowledged_one_is_dropped() -> None:
    ledger = SettleLedger(TIMEOUT, START)
    ledger.fired(_entry(0), [A], at=START - TIMEOUT - 1)  # fired before a long stop: expired on start
    ledger.fired(_entry(1), [B], at=START - 100)
    ledger.fired(_entry(2), [C], at=START - TIMEOUT - 1)
    ledger.noticed(_entry(3), "acknowledge", [C])
    assert ledger.disposition(A, START) == "fire"
    assert ledger.disposition(B, START) == "hold"
    # An acknowledged key is expected back within the ack timeout of the watcher's start, however
    # long the watcher was down.
    assert ledger.disposition(C, START) == "acknowledge"
    assert ledger.expired(START) == [A]
    assert ledger.next_expiry() == START - 1
    ledger.forget(A)
    assert ledger.next_expiry() == START - 100 + TIMEOUT
    assert ledger.expired(START + TIMEOUT) == [B, C]
    assert ledger.disposition(B, START - 100 + TIMEOUT) == "fire"
