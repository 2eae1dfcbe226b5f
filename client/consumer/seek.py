"""A seek in flight: what the broker is asked, and the resubscribe that must wait for its answer.

A SEEK moves the subscription's cursor; the broker then closes the consumer, which subscribes
again and reads from the new position. Pulsar answers the SEEK only once it has removed the closed
consumer and reset the cursor. A SUBSCRIBE sent before that, under the same consumer id, is
answered "already created" for the dying consumer, and nothing is ever delivered: so the
resubscribe waits for the answer.
"""

from __future__ import annotations

import threading
from typing import Any

from ..protocol.message_id import MessageId
from .ack_grouping import id_data


class PendingSeek:
    """The seek of one partition consumer, from its SEEK until the resubscribe that follows it."""

    def __init__(self) -> None:
        self.pending = False  # the next subscribe is the seek's
        self.by_time = False
        self._answered = threading.Event()
        self._answered.set()

    def begin(self, target: MessageId | int) -> dict[str, Any]:
        """A SEEK to ``target`` (a message id, or a publish time in ms) is about to go: its fields."""
        self.pending = True
        self.by_time = not isinstance(target, MessageId)
        self._answered.clear()
        if isinstance(target, MessageId):
            return {"message_id": id_data(target.ledger_id(), target.entry_id())}
        return {"message_publish_time": int(target)}

    def answered(self, ok: bool) -> None:
        """The broker answered the SEEK (``ok`` False: refused, or no answer in time)."""
        if not ok:
            self.pending = False
        self._answered.set()

    def wait_answer(self, timeout: float) -> None:
        """Before a resubscribe: wait (up to ``timeout`` seconds) for the SEEK in flight to be answered."""
        self._answered.wait(timeout)

    def take(self) -> bool:
        """Whether this subscribe is the seek's (it starts at the seek's target); only once."""
        pending, self.pending = self.pending, False
        return pending
