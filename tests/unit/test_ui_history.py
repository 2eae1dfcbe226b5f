"""The Pulsar page's backlog history (airflow_pulsar/ui/history.py): readings from several
processes at once all land, each subscription keeps only its newest readings, old ones go, and a
history that cannot be written never fails the caller."""

from __future__ import annotations

import multiprocessing
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from airflow_pulsar.ui import history


@dataclass(frozen=True)
class Reading:
    messages: int
    entries: int
    exact: bool
    read_at: float


def _write(path: str, writer: int, count: int) -> None:
    for index in range(count):
        reading = Reading(writer * 1000 + index, index, True, time.time())
        history.record_reading("pulsar_default", "persistent://public/default/t", "s", reading, Path(path))


def test_readings_from_several_processes_all_land(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    writers = [multiprocessing.get_context("spawn").Process(target=_write, args=(str(path), w, 50)) for w in range(4)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(120)
        assert writer.exitcode == 0
    (points,) = history.series("pulsar_default", path).values()
    assert sorted(p.messages for p in points) == sorted(w * 1000 + i for w in range(4) for i in range(50))


def test_each_subscription_keeps_its_newest_readings_and_none_too_old(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    now = time.time()
    history.record_reading("c", "t", "old", Reading(1, 1, True, now - history.MAX_AGE_SECONDS - 60), path)
    for index in range(history.READINGS_KEPT + 25):
        history.record_reading("c", "t", "busy", Reading(index, index, index % 2 == 0, now - 1000 + index), path)
    history.record_reading("c", "t", "old", Reading(2, 2, False, now), path)
    found = history.series("c", path)
    busy = found[("t", "busy")]
    assert [p.messages for p in busy] == list(range(25, history.READINGS_KEPT + 25))
    assert [(p.messages, p.exact) for p in found[("t", "old")]] == [(2, False)]
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*) FROM readings").fetchone()[0] == history.READINGS_KEPT + 1
    assert history.series("another connection", path) == {}


def test_a_history_that_cannot_be_written_is_passed_over(tmp_path: Path) -> None:
    blocker = tmp_path / "a file"
    blocker.write_text("")
    history.record_reading("c", "t", "s", Reading(1, 1, True, time.time()), blocker / "history.sqlite3")
    assert history.series("c", blocker / "history.sqlite3") == {}
