"""Event-driven DAGs in a real Airflow deployment (scheduler, triggerer, dag-processor and
api-server as separate processes), with event_driven/dags as the DAGs folder, on both brokers.

A flood of M messages on a watcher with batch size N becomes ceil(M / N) asset events, each
message in exactly one of them and handled by exactly one successful run. A backlog watcher fires
within one poll of its threshold being crossed, once per crossing, while the run it started
drains the subscription. A watcher that acknowledges on success, whose first run fails, has the
failed run's messages come back and handled by a later run: each exactly once in successful runs;
so does one whose triggerer crashes while a run holds a batch, and is stopped while the run succeeds.
"""

from __future__ import annotations

import math
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pendulum
import pytest

from airflow_pulsar.client import Client, InitialPosition
from airflow_pulsar.client.admin import AdminNotFoundError, PulsarAdmin
from tests.deployment.conftest import airflow_deployment
from tests.deployment.event_driven.dags.pulsar_event_driven import (
    BACKLOG_TOPIC,
    BATCH_SIZE,
    BATCH_TOPIC,
    POLL_SECONDS,
    RESTART_TOPIC,
    SETTLED_BATCH,
    SETTLED_TOPIC,
    THRESHOLD,
)
from tests.support.airflow_deployment import AirflowDeployment, poll_api
from tests.support.dag_runs import subscription_stats

pytestmark = pytest.mark.timeout(900)

FOLDERS = Path(__file__).resolve().parent / "event_driven"
BATCHES_DAG, BACKLOG_DAG, SETTLED_DAG = "pulsar_order_batches", "pulsar_ingest_on_backlog", "pulsar_settled_orders"
RESTART_DAG = "pulsar_restart_orders"
# The run-acknowledging watchers: topic -> subscription.
RUN_ACKNOWLEDGED = {SETTLED_TOPIC: "settled", RESTART_TOPIC: "restart"}
FLOOD = 45


def _fresh_topics(web_url: str) -> None:
    """The session's Apache Pulsar is shared: start from topics of our own, the backlog one with its subscription."""
    with PulsarAdmin(web_url) as admin:
        for topic in (BATCH_TOPIC, BACKLOG_TOPIC, *RUN_ACKNOWLEDGED):
            try:
                admin.delete_partitioned_topic(topic, force=True)
            except AdminNotFoundError:
                pass
        for topic, subscription in RUN_ACKNOWLEDGED.items():
            try:
                admin.delete_topic(_settle_topic(topic, subscription), force=True)
            except AdminNotFoundError:
                pass
            admin.create_partitioned_topic(topic, 2)
            admin.create_subscription(topic, subscription, InitialPosition.Earliest)
        admin.create_partitioned_topic(BATCH_TOPIC, 1)
        admin.create_partitioned_topic(BACKLOG_TOPIC, 2)
        admin.create_subscription(BACKLOG_TOPIC, "ingest", InitialPosition.Earliest)


def _settle_topic(topic: str, subscription: str) -> str:
    return f"{topic}-{subscription}-settle"


@pytest.fixture(scope="module")
def event_driven(broker: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AirflowDeployment]:
    _fresh_topics(broker.web_url)
    # A crashed triggerer's watchers move to its successor once its heartbeat is this old.
    restarts = {"AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": "15"}
    with airflow_deployment(broker, tmp_path_factory.mktemp("airflow-events"), FOLDERS / "dags", extra_env=restarts) as airflow:
        yield airflow


def _send(service_url: str, topic: str, values: list[str]) -> float:
    """Publish ``values`` (the producer batches them); the epoch time they were all stored."""
    with Client(service_url) as client:
        producer = client.create_producer(topic)
        for index, value in enumerate(values):
            producer.send_async(value.encode(), None, partition_key=f"k{index}")
        producer.flush()
    return time.time()


def _unpause_and_send(airflow: AirflowDeployment, dag_id: str, service_url: str, topic: str, values: list[str]) -> list[str]:
    """Let the watched DAG run, then publish ``values`` to its topic; the values."""
    airflow.unpause(dag_id)
    _send(service_url, topic, values)
    return values


def _watching(airflow: AirflowDeployment) -> bool:
    return f"Watching the backlog of {BACKLOG_TOPIC}" in airflow.log_tail("triggerer", chars=10**7)


def _fired_within_a_poll(event: dict[str, Any], crossed: float) -> None:
    """The trigger fired on the first poll that could see the crossing: the poll before it began
    before the crossing. The event was stored right after the firing poll."""
    payload = event["extra"]["payload"]
    previous, started = payload["previous_poll_started"], payload["poll_started"]
    stored = pendulum.parse(event["timestamp"]).timestamp()  # type: ignore[union-attr]
    assert previous is not None, "the watcher fired on its first poll: it was not polling yet at the crossing"
    print(f"poll every {started - previous:.2f} s; crossed -> stored {stored - crossed:.2f} s")
    assert previous < crossed
    assert stored - started <= POLL_SECONDS + 3.0  # one reading, and the trip through the triggerer's supervisor


def _finished_runs(airflow: AirflowDeployment, dag_id: str) -> list[dict[str, Any]]:
    runs = airflow.runs(dag_id)
    for run in runs:  # each must succeed; a failed or stuck one fails the test with its logs
        airflow.finished(dag_id, run["dag_run_id"], 300)
    return runs


def test_a_flood_makes_one_asset_event_per_batch_and_each_message_is_handled_once(
    event_driven: AirflowDeployment, broker: Any
) -> None:
    airflow = event_driven
    values = _unpause_and_send(airflow, BATCHES_DAG, broker.service_url, BATCH_TOPIC, [f"order-{index}" for index in range(FLOOD)])

    events = poll_api(
        lambda: (found := airflow.asset_events("deploy_order_batches")) and len(found) >= math.ceil(FLOOD / BATCH_SIZE) and found,
        "an asset event per batch", 180,
    )
    batches = [[item["message"]["value"] for item in event["extra"]["payload"]["messages"]] for event in events]
    assert sorted(len(batch) for batch in batches) == [5, 10, 10, 10, 10]
    assert sorted(value for batch in batches for value in batch) == sorted(values)

    # Airflow gives a run the events up to when its queue entry was made; events stored while that
    # entry waits join the next run, which the next event brings (see the event-driven docs page).
    poll_api(lambda: airflow.queued_asset_events(BATCHES_DAG) == 0, "the scheduler to take the queued events", 180)
    _send(broker.service_url, BATCH_TOPIC, ["closing"])

    def handled() -> list[str]:
        return [value for run in _finished_runs(airflow, BATCHES_DAG) for value in airflow.xcom(BATCHES_DAG, run["dag_run_id"], "handle")]

    poll_api(lambda: "closing" in handled(), "a run for the closing message", 240)
    assert sorted(handled()) == sorted([*values, "closing"])  # every message in exactly one run
    runs = airflow.runs(BATCHES_DAG)
    print(f"{FLOOD} messages, batch size {BATCH_SIZE}: {len(events)} asset events, {len(runs)} runs (with the closing one)")
    assert 2 <= len(runs) <= math.ceil(FLOOD / BATCH_SIZE) + 1


def test_the_backlog_watcher_fires_within_a_poll_of_each_crossing_and_once_per_crossing(
    event_driven: AirflowDeployment, broker: Any
) -> None:
    airflow = event_driven
    airflow.unpause(BACKLOG_DAG)
    # Past its first poll: a starting trigger fetches its connection and stored positions through
    # the triggerer's supervisor first, which takes seconds on a busy machine.
    poll_api(lambda: _watching(airflow), "the backlog watcher's first reading", 120)
    crossed = _send(broker.service_url, BACKLOG_TOPIC, [f"a{index}" for index in range(THRESHOLD)])
    (first,) = poll_api(lambda: airflow.asset_events("deploy_backlog"), "the backlog's asset event", 120)
    _fired_within_a_poll(first, crossed)
    assert first["extra"]["payload"]["new_messages"] == THRESHOLD

    (run,) = poll_api(lambda: airflow.runs(BACKLOG_DAG), "the ingestion run", 120)
    airflow.finished(BACKLOG_DAG, run["dag_run_id"], 300)
    assert airflow.xcom(BACKLOG_DAG, run["dag_run_id"], "ingest") == THRESHOLD
    # Below the threshold: no event, however long it waits.
    _send(broker.service_url, BACKLOG_TOPIC, [f"b{index}" for index in range(THRESHOLD // 2)])
    time.sleep(POLL_SECONDS * 5)
    assert len(airflow.asset_events("deploy_backlog")) == 1

    crossed = _send(broker.service_url, BACKLOG_TOPIC, [f"c{index}" for index in range(THRESHOLD - THRESHOLD // 2)])
    events = poll_api(lambda: (found := airflow.asset_events("deploy_backlog")) and len(found) >= 2 and found, "the second crossing", 120)
    _fired_within_a_poll(events[-1], crossed)
    assert events[-1]["extra"]["payload"]["new_messages"] == THRESHOLD
    assert events[-1]["extra"]["payload"]["previous_positions"] == first["extra"]["payload"]["positions"]
    second = poll_api(lambda: (runs := airflow.runs(BACKLOG_DAG)) and len(runs) >= 2 and runs[-1], "the second ingestion run", 120)
    airflow.finished(BACKLOG_DAG, second["dag_run_id"], 300)
    assert airflow.xcom(BACKLOG_DAG, second["dag_run_id"], "ingest") == THRESHOLD
    time.sleep(POLL_SECONDS * 3)
    assert len(airflow.asset_events("deploy_backlog")) == 2 and len(airflow.runs(BACKLOG_DAG)) == 2
    # The triggerer kept the positions in the asset's state store, for a restart to go on from.
    stored = airflow.api("GET", f"/assets/{events[-1]['asset_id']}/state-store")["asset_state_store"]
    assert {entry["key"]: entry["value"] for entry in stored} == {"pulsar_backlog_positions": events[-1]["extra"]["payload"]["positions"]}


def test_a_failed_run_s_messages_are_handled_by_a_later_run_each_once_in_successful_runs(
    event_driven: AirflowDeployment, broker: Any
) -> None:
    airflow = event_driven
    values = _unpause_and_send(airflow, SETTLED_DAG, broker.service_url, SETTLED_TOPIC, [f"paid-{index}" for index in range(SETTLED_BATCH)])

    def handled() -> list[str]:
        runs = airflow.runs(SETTLED_DAG)
        succeeded = [run for run in runs if run["state"] == "success"]
        return [value for run in succeeded for value in airflow.xcom(SETTLED_DAG, run["dag_run_id"], "handle_once_failing")]

    # The first run fails and releases its batch; the batch comes back in a new event, whose run succeeds.
    poll_api(lambda: len(handled()) >= len(values), "successful runs for every message", 300)
    assert sorted(handled()) == sorted(values)  # each message in exactly one successful run, none lost
    runs = airflow.runs(SETTLED_DAG)
    failed = [run for run in runs if run["state"] == "failed"]
    assert len(failed) == 1, runs
    assert airflow.task_states(SETTLED_DAG, failed[0]["dag_run_id"]) == {
        "handle_once_failing": "failed", "acknowledge": "upstream_failed", "release": "success",
    }
    released = airflow.xcom(SETTLED_DAG, failed[0]["dag_run_id"], "release")
    # The successful runs acknowledged them: nothing left in the subscription.
    with PulsarAdmin(broker.web_url) as admin:
        poll_api(lambda: subscription_stats(admin, SETTLED_TOPIC, "settled")["msgBacklog"] == 0, "the acknowledgements", 60)
    events = airflow.asset_events("deploy_settled_orders")
    # The released messages fired a second time; the others once.
    assert sum(len(event["extra"]["payload"]["messages"]) for event in events) == SETTLED_BATCH + released
    print(f"{SETTLED_BATCH} messages: {len(events)} asset events, {len(runs)} runs, {released} released by the failed one")


def test_across_triggerer_restarts_each_message_is_in_exactly_one_successful_run(
    event_driven: AirflowDeployment, broker: Any
) -> None:
    airflow = event_driven
    values = _unpause_and_send(airflow, RESTART_DAG, broker.service_url, RESTART_TOPIC, [f"kept-{index}" for index in range(SETTLED_BATCH)])
    (run,) = poll_api(lambda: airflow.runs(RESTART_DAG), "the batch's run", 180)

    def handled() -> list[str]:
        succeeded = [run for run in airflow.runs(RESTART_DAG) if run["state"] == "success"]
        return [value for run in succeeded for value in airflow.xcom(RESTART_DAG, run["dag_run_id"], "handle_when_told")]

    with PulsarAdmin(broker.web_url) as admin:

        def watched() -> dict[str, Any]:
            return subscription_stats(admin, RESTART_TOPIC, "restart")

        # The run waits for the test's word: the triggerer crashes while the batch is held, and comes back.
        airflow.stop_component("triggerer", signal.SIGKILL)
        poll_api(lambda: not watched()["consumers"], "the broker to drop the crashed watcher", 60)
        airflow.start_component("triggerer")
        poll_api(lambda: watched()["consumers"] and watched()["unackedMessages"] > 0, "the batch delivered to the new watcher", 180)
        # Stopped again; the run succeeds meanwhile, and its notice waits in the settle topic.
        airflow.stop_component("triggerer")
        (airflow.home / "restart-orders-go").touch()
        airflow.finished(RESTART_DAG, run["dag_run_id"], 300)
        airflow.start_component("triggerer")
        _send(broker.service_url, RESTART_TOPIC, ["closing"])
        poll_api(lambda: "closing" in handled(), "a run for the closing message", 300)

        assert sorted(handled()) == sorted([*values, "closing"])  # each message in exactly one successful run
        # Neither restart fired the held batch again.
        events = airflow.asset_events("deploy_restart_orders")
        assert sorted(item["message"]["value"] for event in events for item in event["extra"]["payload"]["messages"]) == sorted(
            [*values, "closing"]
        )
        poll_api(lambda: watched()["msgBacklog"] == 0, "the acknowledgements", 60)
        settle_topic = _settle_topic(RESTART_TOPIC, "restart")
        poll_api(lambda: subscription_stats(admin, settle_topic, "restart")["msgBacklog"] == 0, "the settle log trimmed", 60)
    print(f"{SETTLED_BATCH} messages and a closing one across two triggerer restarts: {len(events)} asset events")
