"""One operation and the sub-operations it runs side by side, without I/O: which requests are
ready to send, and where each answer goes.

Both admin clients drive a :class:`Scheduler` the same way: :meth:`~Scheduler.send_ready` hands
their sender the requests there is room for (``max_in_flight``), and each outcome comes back
through :meth:`~Scheduler.complete`, until the operation is done; leaving the scheduler's ``with``
block cancels what is still being sent. The blocking client sends from a thread pool, the asyncio
client from tasks; the order of the work, the bound, and what happens when one sub-operation
fails are decided here once for both.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Generic, Protocol

import httpx

from .calls import Operation, T
from .exchange import Exchange, RequestBuilder


class Sending(Protocol):
    """A request being sent (a thread pool's future, an asyncio task)."""

    def cancel(self) -> bool: ...


# Starts sending a request; its outcome is reported to Scheduler.complete with the exchange.
Sender = Callable[[Exchange[Any], httpx.Request], Sending]


@dataclass(eq=False)
class _Group:
    """Sub-operations one exchange waits on together, and their results so far."""

    waiter: Exchange[Any]
    members: list[Exchange[Any]]
    results: list[Any] = field(default_factory=list)
    remaining: int = 0
    abandoned: bool = False


class Scheduler(Generic[T]):
    """The exchanges of one operation: its own and those of every sub-operation it waits on.

    A request is ready as soon as its exchange asks for it. When a sub-operation fails, its
    siblings are closed (their answers, should any still come, are dropped) and the error is
    thrown into the operation that waited on them, which may handle it or fail in turn.
    """

    def __init__(self, operation: Operation[T], build_request: RequestBuilder, max_in_flight: int):
        self._build_request = build_request
        self._max_in_flight = max_in_flight
        self._ready: deque[Exchange[Any]] = deque()
        self._sending: dict[Exchange[Any], Sending] = {}
        self._group_of: dict[Exchange[Any], tuple[_Group, int]] = {}  # a member's group and place in it
        self._waited_on: dict[Exchange[Any], _Group] = {}  # the group an exchange waits on
        self._root: Exchange[T] = Exchange(operation, build_request)
        self._settle(self._root)

    @property
    def done(self) -> bool:
        """Whether the operation has returned or raised."""
        return self._root.done

    @property
    def result(self) -> T:
        """The operation's result; its error is raised instead."""
        if self._root.error is not None:
            raise self._root.error
        return self._root.result

    @property
    def in_flight(self) -> int:
        """Requests sent and not yet answered."""
        return len(self._sending)

    def send_ready(self, send: Sender) -> bool:
        """Start sending the ready requests, oldest first, while fewer than ``max_in_flight`` are
        in flight; whether the operation goes on (False once it is done). The rest wait here, not
        in a queue of the client's: every call waiting in httpx's pool costs the client time."""
        while self._ready and len(self._sending) < self._max_in_flight:
            exchange = self._ready.popleft()
            if exchange.request is not None:  # else abandoned meanwhile
                self._sending[exchange] = send(exchange, exchange.request)
        return not self.done

    def __enter__(self) -> Scheduler[T]:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        """Cancel what is still being sent (an abandoned operation's calls: their answers are not wanted)."""
        for sending in self._sending.values():
            sending.cancel()
        self._sending.clear()

    def complete(self, exchange: Exchange[Any], outcome: httpx.Response | Exception) -> None:
        """Hand ``exchange`` the answer to its request, or the transport failure; any other
        failure of the sender is raised here, ending the operation as it would have without
        calls side by side."""
        del self._sending[exchange]
        if isinstance(outcome, Exception) and not isinstance(outcome, httpx.RequestError):
            raise outcome
        if exchange.request is None:  # abandoned since it was sent
            return
        if isinstance(outcome, httpx.Response):
            exchange.received(outcome)
        else:
            exchange.failed(outcome)
        self._settle(exchange)

    def _settle(self, exchange: Exchange[Any]) -> None:
        """Act on what ``exchange`` waits for now, and on its end for whoever waited on it."""
        while True:
            if exchange.request is not None:
                self._ready.append(exchange)
                return
            if exchange.waiting_on is not None:
                self._start_group(exchange, exchange.waiting_on)
                return
            waiter = self._finish(exchange)
            if waiter is None:
                return
            exchange = waiter

    def _start_group(self, waiter: Exchange[Any], operations: tuple[Operation[Any], ...]) -> None:
        group = _Group(waiter, [], [None] * len(operations), len(operations))
        if not operations:
            waiter.resume([])
            self._settle(waiter)
            return
        self._waited_on[waiter] = group
        for index, operation in enumerate(operations):
            member = Exchange(operation, self._build_request)
            group.members.append(member)
            self._group_of[member] = (group, index)
        for member in list(group.members):
            if group.abandoned:  # a member failed at once and closed the rest
                return
            self._settle(member)

    def _finish(self, exchange: Exchange[Any]) -> Exchange[Any] | None:
        """Record a finished sub-operation; the waiting exchange when it can go on, else None."""
        if exchange is self._root or exchange not in self._group_of:
            return None
        group, index = self._group_of.pop(exchange)
        if exchange.error is not None:
            del self._waited_on[group.waiter]
            self._abandon(group)
            group.waiter.throw(exchange.error)
            return group.waiter
        group.results[index] = exchange.result
        group.remaining -= 1
        if group.remaining:
            return None
        del self._waited_on[group.waiter]
        group.waiter.resume(group.results)
        return group.waiter

    def _abandon(self, group: _Group) -> None:
        """Close every unfinished member of ``group`` (and whatever they wait on in turn)."""
        group.abandoned = True
        for member in group.members:
            if self._group_of.pop(member, None) is None:
                continue
            inner = self._waited_on.pop(member, None)
            if inner is not None:
                self._abandon(inner)
            member.close()
