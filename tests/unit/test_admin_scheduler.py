"""The admin clients' scheduler, without I/O: sub-operations side by side, the bound on calls in
flight, results in order whatever order the answers come in, and a failure closing the siblings."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from airflow_pulsar.client.admin import AdminCall, AdminServerError, Operation
from airflow_pulsar.client.admin.calls import concurrently, decode_json
from airflow_pulsar.client.admin.exchange import Exchange
from airflow_pulsar.client.admin.scheduler import Scheduler


def build(call: AdminCall, url: httpx.URL | None) -> httpx.Request:
    return httpx.Request(call.method, url or f"http://broker{call.path}")


class Sent:
    """A request being sent, as the scheduler sees it (cancellable)."""

    def __init__(self, exchange: Exchange[Any], request: httpx.Request) -> None:
        self.exchange, self.request, self.cancelled = exchange, request, False

    def cancel(self) -> bool:
        self.cancelled = True
        return True


def answer(sent: Sent, status: int = 200) -> httpx.Response:
    return httpx.Response(status, json={"path": sent.request.url.path}, request=sent.request)


def lookup(name: str, closed: list[str] | None = None) -> Operation[str]:
    try:
        first = yield AdminCall("t", "GET", f"/{name}/a", decode=decode_json)
        second = yield AdminCall("t", "GET", f"/{name}/b", decode=decode_json)
        return f"{first['path']}+{second['path']}"
    finally:
        if closed is not None:
            closed.append(name)


def fan_out(names: list[str], closed: list[str] | None = None) -> Operation[list[str]]:
    return (yield from concurrently(lookup(name, closed) for name in names))


def test_results_come_in_order_and_the_calls_in_flight_stay_within_the_bound() -> None:
    names = [f"p{i}" for i in range(10)]
    scheduler = Scheduler(fan_out(names), build, max_in_flight=3)
    in_flight: list[Sent] = []
    peak = 0

    def send(exchange: Exchange[Any], request: httpx.Request) -> Sent:
        in_flight.append(Sent(exchange, request))
        return in_flight[-1]

    while scheduler.send_ready(send):
        peak = max(peak, len(in_flight), scheduler.in_flight)
        sent = in_flight.pop()  # the newest answered first: out of order
        scheduler.complete(sent.exchange, answer(sent))
    assert peak == 3
    assert scheduler.result == [f"/{name}/a+/{name}/b" for name in names]


def test_a_failed_sub_operation_closes_its_siblings_and_raises_in_the_waiter() -> None:
    closed: list[str] = []
    scheduler = Scheduler(fan_out(["p0", "p1", "p2"], closed), build, max_in_flight=8)
    sent: list[Sent] = []
    scheduler.send_ready(lambda exchange, request: sent.append(Sent(exchange, request)) or sent[-1])
    assert [s.request.url.path for s in sent] == ["/p0/a", "/p1/a", "/p2/a"]
    scheduler.complete(sent[1].exchange, answer(sent[1], 500))
    assert scheduler.done
    assert sorted(closed) == ["p0", "p1", "p2"]
    scheduler.complete(sent[0].exchange, answer(sent[0]))  # a late answer to a closed sibling: dropped
    with scheduler:
        pass
    assert sent[2].cancelled and not sent[1].cancelled
    with pytest.raises(AdminServerError) as caught:
        _ = scheduler.result
    assert caught.value.path == "/p1/a"


def test_an_operation_may_handle_its_sub_operations_failure() -> None:
    def tolerant() -> Operation[str]:
        try:
            yield from fan_out(["p0", "p1"])
        except AdminServerError as exc:
            return f"gave up at {exc.path}"
        return "all counted"

    scheduler = Scheduler(tolerant(), build, max_in_flight=8)
    sent: list[Sent] = []
    scheduler.send_ready(lambda exchange, request: sent.append(Sent(exchange, request)) or sent[-1])
    scheduler.complete(sent[0].exchange, answer(sent[0], 503))
    assert not scheduler.send_ready(lambda exchange, request: Sent(exchange, request))
    assert scheduler.result == "gave up at /p0/a"


def test_nothing_to_wait_on_and_nested_fan_outs() -> None:
    def nested() -> Operation[list[Any]]:
        empty = yield from concurrently([])
        inner = yield from concurrently(fan_out([f"{group}{i}" for i in range(2)]) for group in "xy")
        return [empty, inner]

    scheduler = Scheduler(nested(), build, max_in_flight=2)
    pending: list[Sent] = []
    while scheduler.send_ready(lambda exchange, request: pending.append(Sent(exchange, request)) or pending[-1]):
        sent = pending.pop(0)
        scheduler.complete(sent.exchange, answer(sent))
    assert scheduler.result == [[], [["/x0/a+/x0/b", "/x1/a+/x1/b"], ["/y0/a+/y0/b", "/y1/a+/y1/b"]]]


def test_a_sender_failure_other_than_the_transport_ends_the_operation() -> None:
    scheduler = Scheduler(fan_out(["p0", "p1"]), build, max_in_flight=8)
    sent: list[Sent] = []
    scheduler.send_ready(lambda exchange, request: sent.append(Sent(exchange, request)) or sent[-1])
    with pytest.raises(RuntimeError, match="sender broke"), scheduler:
        scheduler.complete(sent[0].exchange, RuntimeError("sender broke"))
    assert sent[1].cancelled
