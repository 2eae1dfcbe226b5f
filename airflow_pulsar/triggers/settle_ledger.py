"""SettleLedger: what a run-acknowledging watcher's settle topic says about each message it fired.

The settle topic is the watcher's log: a ``fired`` record (published before the event is
stored) puts the messages of an event *in flight*; a run's ``acknowledge`` or ``release`` notice
settles them. The ledger is the state those records build, kept in memory and rebuilt from the
topic's unacknowledged records when a watcher starts, so a restarted watcher knows which
redelivered messages a live run still holds. It does no I/O: the watcher (:mod:`.settle_log`)
feeds it records and deliveries and applies what it decides.

Each record is a settle-topic *entry* the watcher acknowledges once nothing depends on it: a
fired record once each of its messages is settled, a notice once the messages it settles are.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from airflow_pulsar.client import MessageId
from airflow_pulsar.triggers.run_settlement import MessageKey, Outcome

# What to do with a delivered message: fire it in a new event, hold it for the live run that
# has it, or acknowledge it (its run succeeded while it was not held).
Disposition = Literal["fire", "hold", "acknowledge"]


@dataclass
class _InFlight:
    """A fired message: when its fired record was published, what its run said, and the
    settle-topic entries that wait for it to be settled."""

    fired_at: float
    outcome: Outcome | None = None
    entries: set[MessageId] = field(default_factory=set)


class SettleLedger:
    """
    In-flight messages and the settle-topic entries that keep them so.

    :param ack_timeout: Seconds after its fired record that an unsettled message is fired anew.
    :param started_at: When the watcher started (epoch seconds): a message its run acknowledged
        while no watcher held it is expected back within ``ack_timeout`` of this.
    """

    def __init__(self, ack_timeout: float, started_at: float) -> None:
        self.ack_timeout = ack_timeout
        self.started_at = started_at
        self._keys: dict[MessageKey, _InFlight] = {}
        self._waiting: dict[MessageId, set[MessageKey]] = {}  # entry -> keys it waits for

    def __contains__(self, key: MessageKey) -> bool:
        return key in self._keys

    def in_flight(self) -> int:
        """How many fired messages are not settled yet."""
        return len(self._keys)

    def fired(self, entry: MessageId, keys: Iterable[MessageKey], at: float) -> list[MessageId]:
        """A fired record at ``at`` (epoch seconds); the earlier entries it leaves with nothing to wait for
        (a message fired anew no longer depends on its earlier fire's records)."""
        keys = set(keys)
        freed = [freed for key in keys for freed in self.forget(key)]
        for key in keys:
            self._keys[key] = _InFlight(at, entries={entry})
        self._waiting[entry] = keys
        return freed

    def noticed(self, entry: MessageId, outcome: Outcome, keys: Iterable[MessageKey]) -> list[MessageKey]:
        """A run's notice; the in-flight keys it settles (the watcher applies the outcome to those it
        holds at once, to the others when they are delivered; with none, the entry waits for nothing).
        A key that is not in flight (settled already, or fired anew after its ack timeout) is not
        the notice's any more."""
        settled = [key for key in dict.fromkeys(keys) if key in self._keys and self._keys[key].outcome is None]
        for key in settled:
            self._keys[key].outcome = outcome
            self._keys[key].entries.add(entry)
        if settled:
            self._waiting[entry] = set(settled)
        return settled

    def outcome(self, key: MessageKey) -> Outcome | None:
        """What the key's run said, None while it is live (or the key is not in flight)."""
        state = self._keys.get(key)
        return state.outcome if state else None

    def disposition(self, key: MessageKey, now: float) -> Disposition:
        """What to do with a delivered message whose key is ``key``."""
        state = self._keys.get(key)
        if state is None or state.outcome == "release" or self._expired(state, now):
            return "fire"
        return "acknowledge" if state.outcome == "acknowledge" else "hold"

    def expired(self, now: float) -> list[MessageKey]:
        """Keys whose run did not settle them within the ack timeout (fired anew when delivered
        again), and acknowledged keys that did not come back to be acknowledged (their
        acknowledgement was recorded before the watcher stopped)."""
        return [key for key, state in self._keys.items() if self._expired(state, now)]

    def next_expiry(self) -> float | None:
        """When the next key expires (epoch seconds), None with nothing in flight."""
        return min((self._expiry(state) for state in self._keys.values()), default=None)

    def forget(self, key: MessageKey) -> list[MessageId]:
        """The key is settled (or fired anew): the entries that no longer wait for anything."""
        state = self._keys.pop(key, None)
        if state is None:
            return []
        freed = []
        for entry in state.entries:
            waiting = self._waiting.get(entry)
            if waiting is not None:
                waiting.discard(key)
                if not waiting:
                    del self._waiting[entry]
                    freed.append(entry)
        return freed

    def _expiry(self, state: _InFlight) -> float:
        since = max(state.fired_at, self.started_at) if state.outcome == "acknowledge" else state.fired_at
        return since + self.ack_timeout

    def _expired(self, state: _InFlight, now: float) -> bool:
        return now >= self._expiry(state)
