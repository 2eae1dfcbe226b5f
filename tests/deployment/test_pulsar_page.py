"""The Pulsar page of the Airflow UI (airflow_pulsar/ui) in a real deployment, opened in headless
Chromium through the UI's navigation: the figures it shows are those the admin API gives, the
backlog chart draws the readings a deferred sensor's trigger recorded, the ingest batches of a
plan log are listed with their states, a connection whose admin URL answers nothing is marked as
such while the rest of the page works, and a user who may not read connections is refused.

Screenshots go to build/ui-screenshots (git-ignored; ``UI_SCREENSHOTS`` names another folder).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from airflow_pulsar.client import Client
from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.spark.job.plan import BatchOutcome, IngestPlan, PartitionPlan, Position, ReadRange
from airflow_pulsar.spark.job.records import ACKED, COMMITTED, PLANNED, PlanRecord, publish_record
from tests.deployment.conftest import airflow_deployment
from tests.support.airflow_deployment import AirflowDeployment, poll_api
from tests.support.browser import chromium_page
from tests.support.ports import free_port

pytestmark = pytest.mark.timeout(900)

DAGS = Path(__file__).resolve().parent / "pulsar_page" / "dags"
DAG_ID = "watch_orders_backlog"
INGEST_DAG_ID = "ingest_orders"
PARTITIONS = 4
MESSAGES = 120
# Published while the sensor watches, so that the chart rises: the page's figures include them.
MORE = 30
DEAD_LETTERS = 3
TABLE = "lake.orders"
# The plan log's two batches, as the page shows their ids.
FIRST_BATCH, SECOND_BATCH = "5be0c31a9d27f468", "c7a94e0f1b3d2856"
SCREENSHOTS = Path(os.environ.get("UI_SCREENSHOTS") or Path(__file__).resolve().parents[2] / "build" / "ui-screenshots")


class Scenario:
    """The topics of the module's run, named as a user's would be (the screenshots are the docs'):
    no other module uses them on the session's brokers."""

    def __init__(self) -> None:
        self.subscription = "orders-to-lake"
        # What the ingest DAG reads (the plan log of ``subscription`` is written by the test).
        self.lake_subscription = "orders-to-parquet"
        self.topic = "persistent://public/default/shop-orders"
        self.dead_letter = f"{self.topic}-{self.subscription}-DLQ"
        self.plan_log = f"persistent://public/default/{self.subscription}-ingest-plans"

    def publish(self, broker: Any) -> None:
        """A backlog on the subscription, dead letters, and a plan log of two batches: one acknowledged, one planned."""
        with PulsarAdmin(broker.web_url) as admin:
            admin.create_partitioned_topic(self.topic, PARTITIONS)
            admin.create_subscription(self.topic, self.subscription)
            admin.create_subscription(self.topic, self.lake_subscription)
        self.orders(broker, range(MESSAGES))
        with Client(broker.service_url) as client:
            dead = client.create_producer(self.dead_letter, batching_enabled=False)
            for index in range(DEAD_LETTERS):
                dead.send(f"dead {index}".encode())
            dead.close()
            for record in self.plan_records():
                publish_record(client, self.plan_log, record)

    def orders(self, broker: Any, indexes: range) -> None:
        """Orders on the topic, in batches of up to ten."""
        with Client(broker.service_url) as client:
            producer = client.create_producer(self.topic, batching_enabled=True, batching_max_messages=10)
            for index in indexes:
                producer.send_async(json.dumps({"order": index}).encode(), None, partition_key=f"k{index}")
            producer.flush()
            producer.close()

    def plan_records(self) -> list[PlanRecord]:
        def plan(batch_id: str, sequence: int, start: int) -> IngestPlan:
            parts = tuple(
                PartitionPlan(
                    f"{self.topic}-partition-{p}", self.topic, p, Position(7, start), Position(7, start + 5),
                    (ReadRange(f"{self.topic}-partition-{p}", p, Position(7, start), Position(7, start + 5)),),
                )
                for p in range(2)
            )  # fmt: skip
            return IngestPlan(batch_id, self.subscription, TABLE, parts, sequence=sequence)

        first, second = plan(FIRST_BATCH, 1, 0), plan(SECOND_BATCH, 2, 5)
        outcome = BatchOutcome(rows={part.topic: 11 * (part.partition + 1) for part in first.partitions})
        return [
            PlanRecord(PLANNED, first, attempt=1),
            PlanRecord(COMMITTED, first, outcome, attempt=1),
            PlanRecord(ACKED, first, outcome, attempt=1),
            PlanRecord(PLANNED, second, attempt=1),
        ]


@pytest.fixture(scope="module")
def scenario(broker: Any) -> Scenario:
    made = Scenario()
    made.publish(broker)
    return made


@pytest.fixture(scope="module")
def deployment(broker: Any, scenario: Scenario, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AirflowDeployment]:
    """Airflow with the page, a second connection whose admin URL answers nothing, and a viewer;
    one ingest run done, and the backlog sensor deferred on the scenario's subscription."""
    nowhere = free_port()
    unreachable = json.dumps(
        {"conn_type": "pulsar", "host": f"pulsar://127.0.0.1:{nowhere}", "extra": {"admin_url": f"http://127.0.0.1:{nowhere}"}}
    )
    home = tmp_path_factory.mktemp("airflow-pulsar-page")
    with airflow_deployment(
        broker, home, DAGS, users={"viewer": "viewer"}, extra_env={"AIRFLOW_CONN_PULSAR_STAGING": unreachable}
    ) as airflow:
        airflow.unpause(INGEST_DAG_ID)
        ingest = airflow.trigger(INGEST_DAG_ID, {"topic": scenario.topic, "subscription": scenario.lake_subscription})
        airflow.finished(INGEST_DAG_ID, ingest, 600)
        airflow.unpause(DAG_ID)
        run_id = airflow.trigger(DAG_ID, {"topic": scenario.topic, "subscription": scenario.subscription})
        poll_api(lambda: airflow.task_states(DAG_ID, run_id).get("wait_for_backlog") == "deferred", "the sensor to defer", 180)
        yield airflow


def token(airflow: AirflowDeployment, user: str) -> str:
    password = json.loads((airflow.home / "passwords.json").read_text())[user]
    response = httpx.post(f"{airflow.api_url}/auth/token", json={"username": user, "password": password}, timeout=30)
    assert response.status_code == 201, response.text
    return str(response.json()["access_token"])


def overview(airflow: AirflowDeployment, user: str = "tester") -> httpx.Response:
    return httpx.get(f"{airflow.api_url}/pulsar/overview.json", headers={"Authorization": f"Bearer {token(airflow, user)}"}, timeout=60)


@pytest.fixture(scope="module")
def readings(deployment: AirflowDeployment, scenario: Scenario, broker: Any) -> int:
    """How many readings of the watched subscription the history holds: three or more before
    :data:`MORE` messages are published, and some after, which count them."""

    def recorded() -> list[int]:
        history = overview(deployment).json()["history"].get("pulsar_default", [])
        found = [s["readings"] for s in history if (s["topic"], s["subscription"]) == (scenario.topic, scenario.subscription)]
        return [reading["messages"] for reading in found[0]] if found else []

    poll_api(lambda: len(recorded()) >= 3, "three backlog readings in the history", 120)
    scenario.orders(broker, range(MESSAGES, MESSAGES + MORE))
    counts = poll_api(lambda: (found := recorded()) and found[-1] == MESSAGES + MORE and found, "a reading of the new messages", 120)
    assert counts[0] == MESSAGES
    return len(counts)


@pytest.fixture(scope="module")
def ui(deployment: AirflowDeployment, readings: int, broker_kind: str) -> Iterator[Any]:
    """The page as the tester sees it in the UI (logged in with the UI's cookie), screenshot taken."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with chromium_page(viewport=(1600, 1300)) as page:
        page.context.add_cookies([{"name": "_token", "value": token(deployment, "tester"), "url": deployment.api_url}])
        page.goto(f"{deployment.api_url}/", wait_until="load")
        page.get_by_role("link", name="Pulsar").first.click()
        page.wait_for_url("**/plugin/pulsar")
        frame = page.frame_locator("iframe").first
        frame.locator("section[data-conn-id='pulsar_default'] table.subscriptions").wait_for(timeout=60_000)
        page.screenshot(path=str(SCREENSHOTS / f"pulsar-page-in-ui-{broker_kind}.png"))
        page.goto(f"{deployment.api_url}/pulsar/?refresh=0", wait_until="load")
        page.screenshot(path=str(SCREENSHOTS / f"pulsar-page-{broker_kind}.png"), full_page=True)
        yield page


def row_text(page: Any, selector: str, cell: str) -> str:
    return str(page.locator(f"{selector} td.{cell}").first.inner_text()).strip()


def test_the_page_shows_the_figures_the_admin_api_gives(ui: Any, broker: Any, scenario: Scenario) -> None:
    section = "section[data-conn-id='pulsar_default']"
    with PulsarAdmin(broker.web_url) as admin:
        backlog = admin.message_backlog(scenario.topic, scenario.subscription)
        stats = admin.partitioned_stats(scenario.topic, per_partition=False)
        stored = admin.internal_stats(scenario.dead_letter)["numberOfEntries"]
    assert backlog.messages == MESSAGES + MORE and backlog.entries < backlog.messages  # batches: fewer entries than messages
    topic_row = f"{section} table.topics tr[data-topic='{scenario.topic}']"
    assert row_text(ui, topic_row, "partitions") == str(PARTITIONS)
    sub_row = f"{section} table.subscriptions tr[data-topic='{scenario.topic}'][data-subscription='{scenario.subscription}']"
    assert row_text(ui, sub_row, "messages") == str(backlog.messages)
    assert row_text(ui, sub_row, "counted") == ("exact" if backlog.exact else "estimated")
    assert row_text(ui, sub_row, "entries") == str(backlog.entries)
    assert row_text(ui, sub_row, "consumers") == str(len(stats["subscriptions"][scenario.subscription]["consumers"]))
    assert row_text(ui, sub_row, "oldest-age").endswith(("s", "min"))
    dead_row = f"{section} table.dead-letters tr[data-topic='{scenario.dead_letter}']"
    assert row_text(ui, dead_row, "stored-entries") == str(stored) == str(DEAD_LETTERS)


def test_the_chart_draws_the_readings_the_trigger_recorded(ui: Any, scenario: Scenario, readings: int) -> None:
    figure = ui.locator(f"figure[data-topic='{scenario.topic}'][data-subscription='{scenario.subscription}']")
    chart = figure.locator("svg.backlog-chart")
    assert int(chart.get_attribute("data-points")) >= readings >= 3
    assert len(chart.locator("polyline").get_attribute("points").split()) >= 3
    box = chart.bounding_box()
    assert box is not None and box["width"] > 300 and box["height"] > 100
    assert f"last {MESSAGES + MORE} messages" in figure.locator("figcaption").inner_text()
    # The line rises (SVG's y grows downwards) when the new messages arrive, and never falls.
    heights = [float(point.split(",")[1]) for point in chart.locator("polyline").get_attribute("points").split()]
    assert heights[0] > heights[-1] and heights == sorted(heights, reverse=True)


def test_the_plan_log_batches_are_listed_with_their_states(ui: Any) -> None:
    first = ui.locator(f"table.batches tr[data-batch-id='{FIRST_BATCH}']")
    second = ui.locator(f"table.batches tr[data-batch-id='{SECOND_BATCH}']")
    assert first.locator("td.state").inner_text() == "acknowledged"
    assert first.locator("td.rows").inner_text() == str(11 + 22)
    assert first.locator("td.planned").inner_text() and first.locator("td.acked").inner_text()
    assert second.locator("td.state").inner_text() == "planned"
    assert second.locator("td.rows").inner_text() == ""
    assert second.locator("td.ranges").inner_text().splitlines() == ["partition 0: 7:5 .. 7:10", "partition 1: 7:5 .. 7:10"]
    # Written by the test, not by a task: no run to link.
    assert (first.locator("td.run").inner_text(), second.locator("td.run").inner_text()) == ("no task found", "not finished yet")


def test_an_unreachable_admin_url_is_marked_and_the_rest_of_the_page_works(ui: Any, scenario: Scenario) -> None:
    unreachable = ui.locator("section[data-conn-id='pulsar_staging']")
    assert "Cannot read the admin API" in unreachable.locator(".unreachable").inner_text()
    assert unreachable.locator("table").count() == 0
    assert ui.locator(f"section[data-conn-id='pulsar_default'] tr[data-subscription='{scenario.subscription}']").count() == 1


def test_an_ingest_run_is_listed_with_its_rows_and_links_to_its_task(ui: Any, deployment: AirflowDeployment, broker_kind: str) -> None:
    (run,) = deployment.runs(INGEST_DAG_ID)
    summary = deployment.xcom(INGEST_DAG_ID, run["dag_run_id"], "ingest")
    batch = ui.locator(f"table.batches tr[data-batch-id='{summary['batch_id']}']")
    assert batch.locator("td.state").inner_text() == "acknowledged"
    assert batch.locator("td.rows").inner_text() == str(summary["total_rows"]) == str(MESSAGES)
    assert batch.locator("td.ranges").inner_text().count("rows)") == PARTITIONS
    # Followed from the page inside the UI, the link opens the task instance in the UI.
    ui.goto(f"{deployment.api_url}/plugin/pulsar", wait_until="load")
    ui.frame_locator("iframe").first.locator(f"tr[data-batch-id='{summary['batch_id']}'] a.task").click()
    ui.wait_for_url(f"**/dags/{INGEST_DAG_ID}/runs/**/tasks/ingest", timeout=60_000, wait_until="commit")
    ui.locator("iframe[title='Pulsar']").wait_for(state="detached", timeout=60_000)
    ui.get_by_text(INGEST_DAG_ID).first.wait_for(timeout=60_000)
    ui.screenshot(path=str(SCREENSHOTS / f"pulsar-page-link-followed-{broker_kind}.png"))


def test_a_user_who_may_not_read_connections_is_refused(ui: Any, deployment: AirflowDeployment, broker_kind: str) -> None:
    refused = overview(deployment, "viewer")
    assert refused.status_code == 403
    assert "may not read connections" in refused.json()["detail"]
    # The browser of the other tests, now logged in as the viewer (this test runs last).
    ui.context.clear_cookies()
    ui.context.add_cookies([{"name": "_token", "value": token(deployment, "viewer"), "url": deployment.api_url}])
    response = ui.goto(f"{deployment.api_url}/pulsar/", wait_until="load")
    assert response is not None and response.status == 403
    assert "may not read connections" in ui.locator(".refused").inner_text()
    assert ui.locator("section.connection").count() == 0
    ui.goto(f"{deployment.api_url}/plugin/pulsar", wait_until="load")
    ui.frame_locator("iframe").first.locator(".refused").wait_for(timeout=60_000)
    ui.screenshot(path=str(SCREENSHOTS / f"pulsar-page-refused-{broker_kind}.png"))
