"""TableView: the latest value of every key of a topic, kept up to date by a reader.

As Pulsar's table view (Java and C++ clients) does, it reads the topic, compacted view first, from
the earliest message: a message with a key sets that key's value, one with a key and an empty
payload (a null value, a tombstone) deletes the key, and a message without a key is skipped.
Creating it returns once every message that was in the topic has been applied; after that a
reading thread of its own applies new messages and calls the listeners with each key and value
(the empty value of a delete included), in the order the messages arrive.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .consumer import Message, Reader, create_reader
from .exceptions import AlreadyClosed, PulsarException, Timeout
from .forks import inherited_message, reset_after_fork
from .protocol.message_id import MessageId
from .schema import BytesSchema, Schema

if TYPE_CHECKING:
    from .services import ClientServices

__all__ = ["TableView", "create_table_view"]

log = logging.getLogger(__name__)

# How long one read of the reading thread waits before it looks whether the view was closed.
_READ_WAIT_MS = 1000


def create_table_view(
    client: ClientServices, topic: str, subscription_name: str | None = None, schema: Schema[Any] | None = None
) -> TableView:
    """A table view of ``topic`` (``pulsar.Client.create_table_view``), filled with what the topic holds."""
    if not isinstance(topic, str):
        raise ValueError(f"Argument topic is expected to be of type 'str' and not '{type(topic).__name__}'")
    if subscription_name is not None and not isinstance(subscription_name, str):
        raise ValueError(
            f"Argument subscription_name is expected to be of type 'str' and not '{type(subscription_name).__name__}'"
        )
    schema = BytesSchema() if schema is None else schema
    if not isinstance(schema, Schema):
        raise ValueError(f"Argument schema is expected to be of type 'Schema' and not '{type(schema).__name__}'")
    reader = create_reader(
        client, topic, MessageId.earliest, schema, is_read_compacted=True, subscription_name=subscription_name
    )
    try:
        return TableView(reader, topic, subscription_name, schema, client.operation_timeout)
    except BaseException:
        reader.close()
        raise


class TableView:
    """A key-to-latest-value map of a topic; mirrors ``pulsar.TableView``. Create it with ``Client.create_table_view``."""

    def __init__(self, reader: Reader, topic: str, subscription: str | None, schema: Schema[Any], replay_timeout: float):
        self._reader = reader
        self._topic = topic
        self._subscription = subscription
        self._schema = schema
        # Values stay as their payloads, decoded on the way out, as the official client keeps them.
        self._data: dict[str, bytes] = {}
        self._listeners: list[Callable[[str, Any], None]] = []
        # Held while a message is applied and its listeners run, and while a listener joins, so a
        # for_each_and_listen sees every key exactly once: in its snapshot or through the listener.
        self._lock = threading.RLock()
        self._closed = threading.Event()
        self._forked_from: int | None = None
        self._replay(int(replay_timeout * 1000))
        self._thread = threading.Thread(target=self._read_tail, name=f"pulsar-table-view-{topic}", daemon=True)
        self._thread.start()
        self._pid = os.getpid()
        reset_after_fork(self._after_fork_in_child)

    def _after_fork_in_child(self) -> None:
        """In a forked child the view would stop updating (its reader is the parent's): it refuses instead."""
        self._lock = threading.RLock()  # the parent's reading thread may have held it at the fork
        if self._forked_from is None:
            self._forked_from = self._pid

    def _check_current(self) -> None:
        if self._forked_from is not None:
            raise AlreadyClosed(inherited_message(f"table view of {self._topic}", self._forked_from))

    def _replay(self, read_timeout_ms: int) -> None:
        """Apply everything the topic holds now."""
        while self._reader.has_message_available():
            self._apply(self._reader.read_next(read_timeout_ms))

    def _read_tail(self) -> None:
        while not self._closed.is_set():
            try:
                message = self._reader.read_next(_READ_WAIT_MS)
            except Timeout:
                continue
            except AlreadyClosed:
                return
            except PulsarException as exc:
                if not self._closed.is_set():
                    log.warning("table view of %s stopped reading: %s", self._topic, exc)
                return
            self._apply(message)

    def _apply(self, message: Message) -> None:
        if message.key_bytes() is None:
            return
        key, value = message.partition_key(), message.data()
        with self._lock:
            if value:
                self._data[key] = value
            else:
                self._data.pop(key, None)
            for listener in self._listeners:
                try:
                    listener(key, self._schema.decode(value))
                except Exception:  # one failing listener must not stop the view or the others
                    log.exception("table view listener failed on key %r of %s", key, self._topic)

    def get(self, key: str) -> Any | None:
        """The latest value of ``key``, decoded by the schema; None if the key has none."""
        self._check_current()
        value = self._data.get(key)
        return None if value is None else self._schema.decode(value)

    def for_each(self, callback: Callable[[str, Any], None]) -> None:
        """Call ``callback(key, value)`` for every entry."""
        self._check_current()
        with self._lock:
            entries = list(self._data.items())
        for key, value in entries:
            callback(key, self._schema.decode(value))

    def for_each_and_listen(self, callback: Callable[[str, Any], None]) -> None:
        """Call ``callback(key, value)`` for every entry, then, on the reading thread, for every update."""
        self._check_current()
        with self._lock:
            for key, value in list(self._data.items()):
                callback(key, self._schema.decode(value))
            self._listeners.append(callback)

    def close(self) -> None:
        """Stop reading and close the reader."""
        self._closed.set()
        self._reader.close()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=_READ_WAIT_MS / 1000 + 5)

    def __len__(self) -> int:
        self._check_current()
        return len(self._data)

    def __str__(self) -> str:
        if self._subscription is None:
            return f"TableView(topic={self._topic})"
        return f"TableView(topic={self._topic}, subscription={self._subscription})"

    def __repr__(self) -> str:
        return self.__str__()
