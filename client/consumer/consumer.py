"""The user-facing Consumer: what ``subscribe`` returns, over one or more partition consumers.

Mirrors ``pulsar.Consumer``. It merges the partition consumers of one or more topics through a
single receiver queue, so a partitioned or multi-topic consumer costs no extra thread and no
extra copy; acks, seeks and redeliveries go to the partition consumer a message came from.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from ..arguments import check, is_int
from ..exceptions import (
    AlreadyClosed,
    CumulativeAcknowledgementNotAllowedError,
    Interrupted,
    InvalidConfiguration,
    OperationNotSupported,
    Timeout,
)
from ..forks import inherited_message
from ..protocol.message_id import MessageId
from ..transaction import Transaction
from .message import Message
from .partition_consumer import PartitionConsumer
from .receiver_queue import ReceiverQueue
from .settings import ConsumerSettings
from .stats import ConsumerStats
from .transactional_acks import acknowledge_in_transaction
from .unpacker import ReceivedEntry

if TYPE_CHECKING:
    from ..services import ClientServices

log = logging.getLogger(__name__)


class Consumer:
    """What ``subscribe`` returns: mirrors ``pulsar.Consumer`` over one or more partition consumers.

    Subclasses subscribe their partition consumers with ``_add_child`` and then call ``_start``.
    """

    def __init__(self, client: ClientServices, topic_label: str, settings: ConsumerSettings):
        self._client = client
        self._topic_label = topic_label
        self._settings = settings
        self._queue = ReceiverQueue()
        # Replaced, never changed in place: a thread iterating it keeps a whole snapshot while
        # the client's partition watch adds partitions.
        self._children: dict[str, PartitionConsumer] = {}
        self._children_lock = threading.Lock()
        self._closing = False  # set first thing by a close: no child is added after
        self._closed = False
        self._closed_because = f"consumer on {topic_label} is closed"
        self._listener_thread: threading.Thread | None = None
        self._listener_paused = threading.Event()
        self._wait_hook: Callable[[], None] | None = None
        self._listener = settings.message_listener
        self._max_messages, self._max_bytes, self._batch_timeout = settings.batch_receive_limits()

    @classmethod
    def of_partition(
        cls, client: ClientServices, topic: str, partition: int, settings: ConsumerSettings, start_message_id: MessageId | None = None
    ) -> Consumer:
        """A subscribed consumer of one partition (``partition`` -1: a non-partitioned topic)."""
        consumer = cls(client, topic, settings)
        consumer._add_child(
            PartitionConsumer(client, topic, partition, settings, consumer._queue, settings.receiver_queue_size, start_message_id)
        )
        consumer._start()
        return consumer

    # ---- children ----

    def _add_child(self, child: PartitionConsumer) -> None:
        child.connect()
        with self._children_lock:
            if not self._closing:
                self._children = {**self._children, child.topic: child}
                return
        child.close()

    def _closing_children(self) -> list[PartitionConsumer]:
        """The children to close, once no more may be added."""
        with self._children_lock:
            self._closing = True
            return list(self._children.values())

    def _start(self) -> None:
        """Called once the children are subscribed: register with the client, start any listener."""
        self._client.register(self)
        # A zero queue (one partition only) asks the broker for one message before each wait.
        children = list(self._children.values())
        if len(children) == 1:
            self._wait_hook = children[0].permits.before_wait
        if self._settings.message_listener is not None:
            self._listener_thread = threading.Thread(target=self._run_listener, name=f"pulsar-listener-{self._topic_label}", daemon=True)
            self._listener_thread.start()

    def _child_for(self, target: Message | MessageId) -> PartitionConsumer:
        if isinstance(target, Message):
            owner = target.delivery.owner
            if owner is None or owner.topic not in self._children:
                raise InvalidConfiguration("the message was not received by this consumer")
            return cast(PartitionConsumer, owner)  # whoever delivers a message is a partition consumer
        if not isinstance(target, MessageId):
            raise ValueError(f"Argument message is expected to be a Message or a MessageId, not {type(target).__name__}")
        if len(self._children) == 1:
            return next(iter(self._children.values()))
        topic = target.topic_name()
        if topic is not None and topic in self._children:
            return self._children[topic]
        matches = [c for c in self._children.values() if c.partition == target.partition() and c.partition >= 0]
        if len(matches) == 1:
            return matches[0]
        # As the official multi-topics consumer: an id that names no topic (one from producer.send) is refused.
        raise OperationNotSupported(f"message id {target} names no topic of this multi-topics consumer; pass the Message")

    # ---- receiving ----

    def receive(self, timeout_millis: int | None = None) -> Message:
        """The next message; raises Timeout after ``timeout_millis`` (None: wait forever)."""
        if self._listener is not None:
            raise InvalidConfiguration("receive() cannot be used with a message_listener")
        if self._closed:
            self.check_open()
        if timeout_millis is not None and not (type(timeout_millis) is int and timeout_millis >= 0):  # the usual ones, at a glance
            check(is_int(timeout_millis) and timeout_millis >= 0, "timeout_millis", "None or an int >= 0", timeout_millis)
        try:
            message = self._queue.take(None if timeout_millis is None else timeout_millis / 1000, self._wait_hook)
        except KeyboardInterrupt as exc:  # Ctrl-C while waiting, reported as the official client reports it
            raise Interrupted(f"receive on {self._topic_label} was interrupted") from exc
        if message is None:
            self.check_open()
            raise Timeout(f"no message within {timeout_millis} ms")
        return message

    def batch_receive(self) -> list[Message]:
        """Pull mode: the messages available within the batch receive policy (possibly none)."""
        self.check_open()
        return self._queue.take_many(self._max_messages, self._max_bytes, self._batch_timeout)

    def take_entries(self, until: tuple[int, int] | None = None) -> list[ReceivedEntry]:
        """For bulk readers that decode entries themselves (the Spark ingest), not on the official
        API: like ``batch_receive``, but whole entries, opened and not split into messages (see
        ReceivedEntry), taken until the batch receive policy's limits. A reader that knows where it
        stops passes that entry's position as ``until`` (ledger id, entry id; one topic only): the
        take then ends with the first entry at or past it, as soon as that entry is in, not at the
        timeout. Their permits are returned at once; acknowledge with an entry's
        ``last_message_id()``. Refused for consumers that track messages one by one (a listener, an
        ack timeout, a dead-letter policy); do not mix with ``receive`` on one consumer."""
        self.check_open()
        settings = self._settings
        if self._listener is not None or settings.unacked_messages_timeout_ms or settings.dead_letter_policy is not None:
            raise InvalidConfiguration("take_entries() needs a consumer without a listener, an ack timeout or a dead-letter policy")
        return self._queue.take_entries(self._max_messages, self._max_bytes, self._batch_timeout, until)

    def check_open(self) -> None:
        """Raise AlreadyClosed once closed, or the error that ended a partition's subscription for good."""
        if self._closed:
            raise AlreadyClosed(self._closed_because)
        for child in self._children.values():
            if child.failure is not None:
                raise child.failure

    # ---- listener ----

    def _run_listener(self) -> None:
        listener = self._settings.message_listener
        while not self._closed:
            if self._listener_paused.is_set():
                time.sleep(0.05)
                continue
            message = self._queue.take(0.1, self._wait_hook)
            if message is None:
                continue
            try:
                listener(self, message)
            except Exception:  # a failing listener must not stop delivery of the next messages
                log.exception("message listener failed on %s", message)

    def pause_message_listener(self) -> None:
        """Stop calling the listener until resumed (messages stay queued)."""
        self._listener_paused.set()

    def resume_message_listener(self) -> None:
        """Call the listener again."""
        self._listener_paused.clear()

    # ---- acknowledgement ----

    def acknowledge(self, message: Message | MessageId, *, transaction: Transaction | None = None) -> None:
        """Acknowledge one message (grouped; with ack receipts, returns once the broker confirmed).

        With ``transaction``, the acknowledgement takes effect when the transaction commits; it is
        sent at once and this returns once the broker accepted it (see ``transactional_acks``).
        """
        if self._closed:
            self.check_open()
        if transaction is not None:
            acknowledge_in_transaction(self._child_for(message), message, transaction, cumulative=False)
            return
        if type(message) is Message:  # the hot path: the message knows its partition consumer
            owner = message.delivery.owner
            if owner is not None and owner.topic in self._children:
                owner.acknowledge(message)
                return
        self._child_for(message).acknowledge(message)

    def acknowledge_cumulative(self, message: Message | MessageId, *, transaction: Transaction | None = None) -> None:
        """Acknowledge every message up to this one in its partition; refused on Shared and Key_Shared.
        With ``transaction``, as in :meth:`acknowledge`."""
        self.check_open()
        if self._settings.shared:
            raise CumulativeAcknowledgementNotAllowedError(
                f"acknowledge_cumulative is not allowed on a {self._settings.consumer_type.name} subscription"
            )
        if transaction is not None:
            acknowledge_in_transaction(self._child_for(message), message, transaction, cumulative=True)
            return
        self._child_for(message).acknowledge_cumulative(message)

    def negative_acknowledge(self, message: Message | MessageId) -> None:
        """Have the message redelivered after ``negative_ack_redelivery_delay_ms``."""
        self.check_open()
        try:
            child = self._child_for(message)
        except OperationNotSupported as exc:
            # The official client ignores such an id here, where it refuses it in an acknowledge.
            log.warning("negative_acknowledge ignored: %s", exc)
            return
        child.negative_acknowledge(message)

    def redeliver_unacknowledged_messages(self) -> None:
        """Have every unacknowledged message delivered again."""
        self.check_open()
        for child in self._children.values():
            child.redeliver_all()

    # ---- positions ----

    def seek(self, messageid: MessageId | int) -> None:
        """Reset the subscription to a message id or a publish timestamp (ms since the epoch)."""
        self.check_open()
        if not isinstance(messageid, (MessageId, int)) or isinstance(messageid, bool):
            raise ValueError(f"Argument messageid must be a MessageId or an int timestamp, got {messageid!r}")
        if isinstance(messageid, MessageId) and len(self._children) > 1:
            if messageid not in (MessageId.earliest, MessageId.latest):
                self._child_for(messageid).seek(messageid)
                return
        for child in self._children.values():
            child.seek(messageid)

    def get_last_message_id(self) -> MessageId:
        """The id of the last message in the topic (one partition only; see get_last_message_ids)."""
        self.check_open()
        if len(self._children) != 1:
            raise InvalidConfiguration("get_last_message_id needs a single partition; use get_last_message_ids()")
        return next(iter(self._children.values())).get_last_message_id()[0]

    def get_last_message_ids(self) -> dict[str, tuple[MessageId, MessageId | None]]:
        """Per partition: (last message id, the subscription's mark-delete position)."""
        self.check_open()
        return {topic: child.get_last_message_id() for topic, child in self._children.items()}

    # ---- what the reader and the asyncio facade build on ----

    @property
    def receiver_queue(self) -> ReceiverQueue:
        """The queue every partition consumer feeds and ``receive`` takes from."""
        return self._queue

    @property
    def wait_hook(self) -> Callable[[], None] | None:
        """What a receiver calls before it waits for an entry (a zero queue asks the broker for one)."""
        return self._wait_hook

    @property
    def settings(self) -> ConsumerSettings:
        """The settings the consumer was subscribed with."""
        return self._settings

    @property
    def partition_consumers(self) -> list[PartitionConsumer]:
        """One per subscribed partition."""
        return list(self._children.values())

    # ---- identity ----

    def topic(self) -> str:
        """The topic (or topics, or pattern) subscribed to."""
        return self._topic_label

    def subscription_name(self) -> str:
        """The subscription name."""
        return self._settings.subscription_name

    def consumer_name(self) -> str:
        """This consumer's name (of its first partition consumer)."""
        return next(iter(self._children.values())).consumer_name if self._children else (self._settings.consumer_name or "")

    def is_connected(self) -> bool:
        """Whether every partition consumer is subscribed right now."""
        return not self._closed and all(child.connected for child in self._children.values())

    def stats(self) -> ConsumerStats:
        """Counters summed over the partitions (see ConsumerStats; str() gives one log line)."""
        return ConsumerStats.combine(self._topic_label, [child.stats() for child in self._children.values()])

    # ---- closing ----

    def unsubscribe(self) -> None:
        """Delete the subscription on the broker and close this consumer."""
        self.check_open()
        for child in self._closing_children():
            child.unsubscribe()
        self._finish_close()

    def close(self) -> None:
        """Flush pending acks and close (idempotent)."""
        if self._closed:
            return
        for child in self._closing_children():
            child.close()
        self._finish_close()

    def shutdown(self) -> None:
        """Close at once, as ``Client.shutdown`` does: pending acks are dropped, nothing is sent to the broker."""
        if self._closed:
            return
        for child in self._closing_children():
            child.close(graceful=False)
        self._finish_close()

    def log_stats(self) -> None:
        """Log one line of this consumer's statistics."""
        log.info("%s", self.stats())

    def forked(self, parent_pid: int) -> None:
        """This process was forked from ``parent_pid``, whose subscription this is: closed here,
        nothing sent to the broker, no acknowledgement made for the parent (see ``forks``)."""
        self._children_lock = threading.Lock()
        self._closing = True
        self._closed_because = inherited_message(f"consumer on {self._topic_label}", parent_pid)
        self._closed = True

    def _finish_close(self) -> None:
        self._closed = True
        self._queue.close()
        self._client.unregister(self)
        if self._listener_thread is not None and self._listener_thread is not threading.current_thread():
            self._listener_thread.join(timeout=5)

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Consumer(topic={self._topic_label!r}, subscription={self._settings.subscription_name!r})"


