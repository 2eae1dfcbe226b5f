"""What becomes of the client's objects in a process forked from the one that made them.

Airflow's LocalExecutor and Celery's prefork pool fork worker processes after their imports, so a
client made at import time reaches the workers. A fork copies the process's memory but only the
thread that called ``fork()``: the copy of a client has no reader, writer or timer thread, its
locks may be held by threads that no longer exist, and its sockets are the very sockets the
parent still uses (a frame written from the child interleaves with the parent's; a reply is read
by whichever process reads first). Left alone, a send in the child waits forever for a receipt
that the parent's reader thread takes. So, in every child, right after the fork
(``os.register_at_fork(after_in_child=...)``), before anything else runs:

- **Client** (sync, and the asyncio client over it) keeps working: it starts over with an empty
  connection pool, a new timer thread, partition watch and memory limit, and fresh locks; it
  connects again on first use, as a new client would, with the same settings. Users expect a
  client made at import to serve the process that uses it, and it holds nothing on the broker
  but its connections.
- **Producer, Consumer, Reader** opened before the fork are closed in the child: every call
  raises :class:`~.exceptions.AlreadyClosed` saying so and naming the fix (open it again in this
  process from the same client); ``close()`` returns quietly. Their broker sessions (a producer's
  id, name and sequence ids, which deduplication keys on; a consumer's place on its subscription
  and the messages delivered to it, unacknowledged) belong to the parent, which keeps using them.
  Taking them over is not possible (the broker refuses a second Exclusive consumer or a producer
  under a name in use) and re-creating them behind the user's back under a new name would quietly
  change what deduplication and ordering guarantee, so the child is told instead.
- **TableView** refuses likewise: its reader is the parent's, so it would stop updating unseen.
- **PulsarAdmin, AsyncPulsarAdmin** keep working over a new HTTP connection pool.

The parent's connections are never closed from the child: closing would write CLOSE_PRODUCER or
CLOSE_CONSUMER, or shut the socket down, on the parent's session. The child closes only its own
copies of their file descriptors, which leaves the parent's sockets open. Objects register what
to reset with :func:`reset_after_fork`; the reset runs in the child only, in the one thread there
is, so it takes no lock that a vanished thread might hold.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections.abc import Callable

__all__ = ["inherited_message", "reset_after_fork"]

log = logging.getLogger(__name__)

_lock = threading.Lock()
# Bound methods, weakly: an object that is gone needs no reset.
_resets: list[weakref.WeakMethod[Callable[[], None]]] = []
# Dead references are dropped when the list reaches this length (then twice the live ones).
_prune_at = 64


def reset_after_fork(method: Callable[[], None]) -> None:
    """Call the bound ``method`` in each process forked from this one from now on, right after the
    fork, for as long as its object lives here. It runs before any other code of the child, on its
    only thread: it must not wait for locks of its object, and should only replace state."""
    global _prune_at
    reference = weakref.WeakMethod(method)
    with _lock:
        _resets.append(reference)
        if len(_resets) >= _prune_at:
            _resets[:] = [r for r in _resets if r() is not None]
            _prune_at = max(64, 2 * len(_resets))


def inherited_message(what: str, parent_pid: int) -> str:
    """Why ``what`` (a producer, consumer or reader "on <topic>") refuses to work in a forked child."""
    return (
        f"{what} was opened in process {parent_pid}, which this process was forked from: its broker "
        "session stays with that process. Open it again in this process from the same client (the client "
        "reconnects after a fork), e.g. in the task itself, or in Celery's worker_process_init."
    )


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.Lock()  # a thread of the parent may have held it
    live = [method for method in (r() for r in _resets) if method is not None]
    _resets[:] = [weakref.WeakMethod(method) for method in live]
    for method in live:
        try:
            method()
        except Exception:  # one object's failure must not leave the others with the parent's state
            log.exception("resetting %r after fork failed", method)


if hasattr(os, "register_at_fork"):  # every platform that can fork
    os.register_at_fork(after_in_child=_after_fork_in_child)
