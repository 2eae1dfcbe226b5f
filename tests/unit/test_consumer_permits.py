"""Flow-control permits: FLOW at half a queue, a fresh queue per subscribe, and the zero queue's one-at-a-time asks."""

from __future__ import annotations

from airflow_pulsar.client.consumer.permits import Permits


class Broker:
    """Records the FLOWs sent; ``connected`` False makes them fail as on a lost connection."""

    def __init__(self) -> None:
        self.flows: list[int] = []
        self.connected = True

    def send_flow(self, count: int) -> bool:
        if self.connected:
            self.flows.append(count)
        return self.connected


def test_a_subscribe_offers_a_whole_queue_and_taken_messages_flow_back_at_half_of_it() -> None:
    broker = Broker()
    permits = Permits(100, broker.send_flow)
    permits.grant_initial()
    assert broker.flows == [100]
    for _ in range(49):
        permits.returned()
    assert broker.flows == [100] and permits.available == 49
    permits.returned()
    assert broker.flows == [100, 50] and permits.available == 0
    permits.returned(70)  # discarding a whole batch at once goes out in one FLOW
    assert broker.flows == [100, 50, 70]
    assert (permits.flows_sent, permits.permits_sent) == (3, 220)


def test_a_resubscribe_forgets_the_permits_counted_before_it() -> None:
    broker = Broker()
    permits = Permits(10, broker.send_flow)
    permits.grant_initial()
    permits.returned(4)
    permits.grant_initial()  # the broker knows nothing of the four
    assert broker.flows == [10, 10] and permits.available == 0
    permits.returned(4)
    assert permits.available == 4 and broker.flows == [10, 10]


def test_flows_that_cannot_be_sent_are_not_counted_and_not_kept() -> None:
    broker = Broker()
    permits = Permits(4, broker.send_flow)
    broker.connected = False
    permits.grant_initial()
    permits.returned(2)
    assert broker.flows == [] and (permits.flows_sent, permits.permits_sent, permits.available) == (0, 0, 0)
    broker.connected = True
    permits.returned(1)
    assert broker.flows == [] and permits.available == 1  # the lost ones are for the resubscribe to grant


def test_a_queue_of_one_flows_every_message() -> None:
    broker = Broker()
    permits = Permits(1, broker.send_flow)
    permits.grant_initial()
    permits.returned()
    permits.returned()
    assert broker.flows == [1, 1, 1]


def test_a_kept_queue_asks_nothing_before_a_wait() -> None:
    broker = Broker()
    permits = Permits(10, broker.send_flow)
    permits.before_wait()
    permits.before_wait()
    assert broker.flows == []


def test_a_zero_queue_asks_for_one_message_per_wait_until_it_arrives() -> None:
    broker = Broker()
    permits = Permits(0, broker.send_flow)
    permits.grant_initial()
    permits.returned(5)
    assert broker.flows == []  # no credit is kept or given back
    permits.before_wait()
    permits.before_wait()  # woken without the message: still outstanding, not asked again
    assert broker.flows == [1]
    permits.clear_request()  # it arrived
    permits.before_wait()
    assert broker.flows == [1, 1]


def test_a_zero_queue_asks_again_after_a_failed_ask_or_a_resubscribe() -> None:
    broker = Broker()
    permits = Permits(0, broker.send_flow)
    broker.connected = False
    permits.before_wait()
    broker.connected = True
    permits.before_wait()
    assert broker.flows == [1]
    permits.clear_request()  # a resubscribe voids the request
    permits.request_one()
    assert broker.flows == [1, 1] and permits.flows_sent == 2


def test_a_count_written_back_by_a_return_that_raced_the_resubscribe_is_dropped() -> None:
    broker = Broker()
    permits = Permits(10, broker.send_flow)
    permits.grant_initial()
    permits.available = 4  # a returned() on the receiving thread read its count before the resubscribe reset it
    permits.returned(1)
    assert permits.available == 1 and broker.flows == [10]


def test_a_zero_queue_message_that_arrives_before_its_ask_returns_lets_the_next_wait_ask() -> None:
    flows: list[int] = []

    def send_flow(count: int) -> bool:
        flows.append(count)
        permits.clear_request()  # the reader thread queued the message while the FLOW was being written
        return True

    permits = Permits(0, send_flow)
    permits.before_wait()
    permits.before_wait()
    assert flows == [1, 1]
