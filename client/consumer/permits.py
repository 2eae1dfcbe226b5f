"""Flow control: the permits a partition consumer gives the broker.

The broker sends a consumer only as many messages as it has permits for, and a consumer grants
them with FLOW commands. After a (re)subscribe it offers a whole receiver queue; then each message
the application takes (or the consumer discards) gives a permit back, and once half a queue's
worth has built up they go out in one FLOW. A consumer whose available permits never grow is one
whose application has stopped taking messages: the "stuck" consumer.

A zero queue (``receiver_queue_size=0``) keeps no credit at all: before the receiver waits, it
asks for exactly one message, and asks again only once that message has arrived or the consumer
has subscribed again.
"""

from __future__ import annotations

from collections.abc import Callable


class Permits:
    """Flow-control permits of one partition consumer.

    ``available`` counts messages the application has taken since the last FLOW; they are sent in
    one FLOW as soon as they reach half the queue size (every message for a queue of 0 or 1).
    ``send_flow(count)`` writes a FLOW and says whether it could (not while disconnected).

    Only the thread holding the receiver queue's take lock returns permits (taking, unpacking and
    dropping stale messages all happen under it), so counting needs no lock of its own; a
    resubscribe, on another thread, only marks the count to start afresh.
    """

    def __init__(self, queue_size: int, send_flow: Callable[[int], bool]):
        self.queue_size = queue_size
        self.threshold = max(queue_size // 2, 1)
        self.available = 0
        self.flows_sent = 0
        self.permits_sent = 0
        self._send_flow = send_flow
        self._restart = False
        self._asked = False  # zero queue: one message is asked for and has not arrived yet

    def grant_initial(self) -> None:
        """After a (re)subscribe the broker knows no permits: offer a whole queue again."""
        self._restart = True
        self.available = 0
        if self.queue_size > 0:
            self._flow(self.queue_size)

    def returned(self, count: int = 1) -> None:
        """The application took (or the consumer discarded) ``count`` messages (under the take lock)."""
        if self._restart:
            self._restart = False
            available = count
        else:
            available = self.available + count
        if available < self.threshold:
            self.available = available
            return
        self.available = 0
        if self.queue_size:  # a zero queue asks for each message itself
            self._flow(available)

    def before_wait(self) -> None:
        """The receiver is about to wait for an entry: a zero queue asks for one message now."""
        if self.queue_size == 0:
            self.request_one()

    def request_one(self) -> None:
        """Ask the broker for exactly one message, unless one asked for has not arrived yet."""
        if not self._asked:
            # Marked before the FLOW goes out: the message may arrive, and clear the mark, before it returns.
            self._asked = True
            if not self._flow(1):
                self._asked = False

    def clear_request(self) -> None:
        """The message asked for arrived, or a (re)subscribe voided the request: ask again when needed."""
        self._asked = False

    def _flow(self, count: int) -> bool:
        # If the connection is down the permits are moot: the resubscribe grants a fresh queue.
        if not self._send_flow(count):
            return False
        self.flows_sent += 1
        self.permits_sent += count
        return True
