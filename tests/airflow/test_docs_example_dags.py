"""The DAG examples of the docs, run as shown. docs/examples/dags/orders_operators.py, whose marked
parts the operator pages include, runs with ``airflow dags test`` in a fresh AIRFLOW_HOME whose DAGs
and plugins folders are the docs' (the user functions, ``my_project``, in the plugins folder as the
pages advise), against the embedded broker process. docs/examples/dags/handle_alerts.py, the
event-driven page's, is loaded as the DAG processor loads it, and its watcher's trigger fires on a
critical alert published to the broker under test."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_pulsar.broker.process import BrokerProcess
from airflow_pulsar.client import Client
from airflow_pulsar.client.admin import PulsarAdmin
from tests.support.dag_files import load_dag_file
from tests.support.dag_runs import DOCS_EXAMPLES as EXAMPLES
from tests.support.dag_runs import run_docs_example_dag
from tests.support.polling import wait_until


@pytest.fixture(scope="module")
def embedded_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("docs-examples-broker")).start()
    try:
        yield process
    finally:
        process.stop()


@pytest.mark.parametrize(
    "example", ["orders_operators.py", "handle_alerts.py", "ingest_on_backlog.py", "exactly_once_orders.py", "orders_on_success.py"]
)
def test_every_marked_part_is_included_by_a_page(example: str) -> None:
    pages = "".join(page.read_text() for page in EXAMPLES.parent.glob("*.md"))
    markers = re.findall(r"# \[START (\w+)\]", (EXAMPLES / "dags" / example).read_text())
    assert markers, f"{example} marks no part for the pages"
    for marker in markers:
        assert f"examples/dags/{example}\n:language: python\n:start-after: [START {marker}]" in pages, marker


def test_the_operators_examples_run(embedded_broker: BrokerProcess, tmp_path: Path) -> None:
    results = run_docs_example_dag("orders_operators", embedded_broker, tmp_path / "airflow")
    assert results["orders_topic"]["partitions"] == 4
    assert results["publish_orders"]["messages"] == 10_000
    assert results["wait_for_orders"]["messages"] == 10_000
    assert results["wait_for_order_42"]["message"]["value"] is not None
    assert results["load_orders"]["messages"] == results["load_orders"]["acknowledged"] == 10_000
    assert results["load_events"]["dead_lettered"] == 1
    with PulsarAdmin(embedded_broker.web_url) as admin:
        assert admin.backlog("orders", "warehouse").msg_backlog == 0
        assert admin.message_backlog("events-dead", "audit").messages == 1


def test_the_event_driven_examples_watch_the_topic(broker, broker_admin: PulsarAdmin, monkeypatch: pytest.MonkeyPatch) -> None:
    """The watcher's trigger consumes ``alerts`` through the default connection and fires on the
    critical alert only; the dead-letter trigger carries its policy to the triggerer."""
    monkeypatch.syspath_prepend(str(EXAMPLES / "plugins"))  # where the triggerer finds my_project
    module = load_dag_file(EXAMPLES / "dags" / "handle_alerts.py", "docs_handle_alerts")
    assert module.alerts.uri == "pulsar://localhost:6650/persistent/public/default/alerts"
    watcher_trigger = module.alerts.watchers[0].trigger

    async def first_event(producer: Any) -> Any:
        events = watcher_trigger.run()
        first = asyncio.ensure_future(anext(events))
        try:
            # The subscription starts at the latest message: publish once it exists.
            await asyncio.to_thread(
                wait_until, lambda: "airflow-alerts" in broker_admin.list_subscriptions("alerts"), "the watcher's subscription", 30
            )
            producer.send(b"disk at 80%", properties={"severity": "warning"})
            producer.send(b"disk full", properties={"severity": "critical"})
            return await asyncio.wait_for(asyncio.shield(first), 30)
        finally:
            first.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                await first
            await events.aclose()

    with Client(broker.service_url) as client:
        producer = client.create_producer("alerts", batching_enabled=False)  # the topic exists from here on
        event = asyncio.run(first_event(producer))
    assert event.payload["message"]["value"] == "disk full" and event.payload["result"] is True

    _, kwargs = module.trigger.trigger.serialize()
    assert (kwargs["max_redeliver_count"], kwargs["dead_letter_topic"], kwargs["redelivery_delay"]) == (5, "alerts-rejected", 10)


def test_the_event_driven_ingestion_example_fires_on_the_backlog(broker, broker_admin: PulsarAdmin) -> None:
    """The backlog watcher fires once ``lakehouse`` holds 1000 messages, nothing consumed; the
    batch watcher's settings reach the Pulsar trigger; the DAG ingests with PulsarToTableOperator."""
    from airflow_pulsar.client import InitialPosition

    module = load_dag_file(EXAMPLES / "dags" / "ingest_on_backlog.py", "docs_ingest_on_backlog")
    broker_admin.create_partitioned_topic("shop-events", 4)
    broker_admin.create_subscription("shop-events", "lakehouse", InitialPosition.Earliest)
    trigger = module.shop_events_backlog.watchers[0].trigger
    trigger.poll_interval = 0.3

    async def first_event() -> Any:
        events = trigger.run()
        try:
            return (await asyncio.wait_for(anext(events), 30)).payload
        finally:
            await events.aclose()
            await trigger.cleanup()

    try:
        with Client(broker.service_url) as client:
            producer = client.create_producer("shop-events")
            for index in range(1000):
                producer.send_async(b"{}", None, partition_key=f"user-{index}")
            producer.flush()
        event = asyncio.run(first_event())
        assert event["new_messages"] == event["backlog"]["messages"] == 1000
        assert len(event["positions"]) == 4
        assert broker_admin.message_backlog("shop-events", "lakehouse").messages == 1000  # consumed nothing
    finally:
        broker_admin.delete_partitioned_topic("shop-events", force=True)
    _, kwargs = module.orders.watchers[0].trigger.serialize()
    assert (kwargs["batch_size"], kwargs["batch_timeout"]) == (500, 10.0)
