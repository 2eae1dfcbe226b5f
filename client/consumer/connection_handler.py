"""Keeping one partition consumer subscribed: its connection, and resubscribing after a loss.

The first subscribe is retried while its errors are retryable. When the connection drops or the
broker closes the consumer (a seek, an unload), one thread resubscribes with backoff until a
broker accepts the consumer, the consumer closes, or the broker refuses it for good.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from ..backoff import Backoff
from ..connection import Connection
from ..exceptions import AlreadyClosed, ConnectError, PulsarException, Result, Timeout

log = logging.getLogger(__name__)

# A resubscribe refused for one of these will be refused again: the consumer fails instead of retrying.
_RESUBSCRIBE_FATAL = frozenset(
    {
        Result.AuthenticationError,
        Result.AuthorizationError,
        Result.TopicNotFound,
        Result.SubscriptionNotFound,
        Result.InvalidTopicName,
        Result.NotAllowedError,
    }
)


class ConnectionHandler:
    """The connection one partition consumer is subscribed on, and the resubscribes that keep it so.

    ``subscribe(reconnect)`` makes one attempt and, once the broker accepted it, calls
    :meth:`attach`; ``fail(error)`` is told when a resubscribe was refused for good.
    """

    def __init__(
        self,
        consumer_id: int,
        consumer_name: str,
        topic: str,
        subscribe: Callable[[bool], None],
        fail: Callable[[PulsarException], None],
    ):
        self.consumer_id = consumer_id
        self.consumer_name = consumer_name
        self.topic = topic
        self._subscribe = subscribe
        self._fail = fail
        self.connection: Connection | None = None  # None while not subscribed
        self.closing = False  # set once the consumer closes: a loss from then on is not resubscribed
        self.reconnects = 0
        self._ready = threading.Event()
        # One (re)subscribe at a time: a second one on the same connection would bump the epoch and
        # drop messages the broker counts as delivered, which it then never sends again.
        self._lock = threading.Lock()
        self._reconnecting = False
        self._closed = threading.Event()

    @property
    def connected(self) -> bool:
        """Whether the consumer is subscribed right now."""
        return self.connection is not None and not self.closing

    def connect(self, with_retries: Callable[[str, Callable[[], None]], None]) -> None:
        """The first subscribe: retried by ``with_retries`` while its errors are retryable."""
        self._reconnecting = True  # a loss meanwhile is retried here, not by a second subscriber
        try:
            with_retries(f"subscribe to {self.topic}", lambda: self._subscribe(False))
        except BaseException:
            self._reconnecting = False
            raise
        if not self._settled():
            self._start_reconnect()

    def attach(self, connection: Connection, reconnect: bool) -> None:
        """The broker accepted the subscribe on ``connection``: the consumer is ready on it."""
        with self._lock:
            if connection.closed:  # closed before it could tell us: subscribe again elsewhere
                raise ConnectError(f"connection to {connection.address} closed while subscribing to {self.topic}")
            self.connection = connection
            if reconnect:  # counted before permits go out, so it precedes any redelivered message
                self.reconnects += 1
            self._ready.set()

    def lost(self, broker_closed: bool = False) -> None:
        """The connection dropped or (``broker_closed``) the broker closed the consumer: subscribe again.

        After a broker close the first attempt waits one backoff step, as the official clients do:
        Pulsar removes a reader's subscription asynchronously after a seek, and a subscribe that
        lands in between joins the dying subscription (no messages, or a cursor past the seek).
        """
        with self._lock:
            self._ready.clear()
            self.connection = None
            if self.closing or self._reconnecting:
                return  # the running (re)subscribe sees the loss and goes round again
            self._reconnecting = True
        self._start_reconnect(broker_closed)

    def wait(self, timeout: float) -> Connection:
        """The connection, once subscribed; AlreadyClosed, or Timeout after ``timeout`` seconds."""
        if self.closing:
            raise AlreadyClosed(f"consumer on {self.topic} is closed")
        if not self._ready.wait(timeout) or self.connection is None:
            raise Timeout(f"consumer on {self.topic} could not reconnect within {timeout:g} s")
        return self.connection

    def close(self) -> None:
        """No more resubscribes: the consumer is closing."""
        self.closing = True
        self._closed.set()
        self._ready.clear()
        self.connection = None

    def _start_reconnect(self, wait_first: bool = False) -> None:
        threading.Thread(target=self._reconnect, args=(wait_first,), name=f"pulsar-reconnect-{self.consumer_id}", daemon=True).start()

    def _settled(self) -> bool:
        """After a subscribe: end the reconnect, unless the connection was lost meanwhile."""
        with self._lock:
            if self.connection is None:
                return False
            self._reconnecting = False
            return True

    def _reconnect(self, wait_first: bool) -> None:
        backoff = Backoff()
        if wait_first:
            self._closed.wait(backoff.next())
        while not self.closing:
            try:
                self._subscribe(True)
                if self._settled():
                    log.info("consumer %s resubscribed to %s", self.consumer_name, self.topic)
                    return
                reason = "connection lost again"
            except PulsarException as exc:
                if exc.result in _RESUBSCRIBE_FATAL:
                    log.error("consumer %s cannot resubscribe to %s: %s", self.consumer_name, self.topic, exc)
                    self._fail(exc)
                    break
                reason = str(exc)
            delay = backoff.next()
            log.info("resubscribing %s to %s failed (%s); retrying in %.1f s", self.consumer_name, self.topic, reason, delay)
            if self._closed.wait(delay):
                break
        with self._lock:
            self._reconnecting = False
