"""The broker ledger's message counting: how many entries a number of permits reaches."""

from __future__ import annotations

from airflow_pulsar.broker.ledger import Ledger


def test_entries_for_counts_whole_entries_up_to_the_permits() -> None:
    # entry id, messages, bytes: two batches of 1000, a single message, a hole (failed commit), a batch of 5
    ledger = Ledger(None, 1, [(0, 1000, 10), (1, 1000, 10), (2, 1, 1), (4, 5, 1)])  # type: ignore[arg-type]
    assert ledger.last_entry_id == 4
    assert ledger.entries_for(0, 1, 100) == 1, "one permit still takes a whole batch"
    assert ledger.entries_for(0, 1000, 100) == 1
    assert ledger.entries_for(0, 1001, 100) == 2
    assert ledger.entries_for(2, 2, 100) == 3, "the hole holds no message: the next entry is needed"
    assert ledger.entries_for(0, 10**6, 3) == 3, "capped by the limit"
    assert ledger.entries_for(4, 10**6, 100) >= 1
