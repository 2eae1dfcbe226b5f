"""The page's HTML: one section per connection, with its topics, subscriptions, dead-letter
topics, backlog charts and ingest batches. Server-side HTML that reloads itself every ``refresh``
seconds; every figure sits in a cell whose class names it. Its one script opens the links to runs
and tasks in the UI around it: the UI frames the page in a sandbox that may not navigate the
window, so the link is handed to the UI's router through the window's history instead."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from html import escape
from urllib.parse import quote

from airflow_pulsar.ui.batches import IngestBatch
from airflow_pulsar.ui.chart import backlog_chart, clock
from airflow_pulsar.ui.history import Point
from airflow_pulsar.ui.overview import ConnectionOverview, SubscriptionFigures, TopicFigures

Series = Mapping[tuple[str, str], Sequence[Point]]

_STYLE = """
body { font-family: system-ui, sans-serif; font-size: 14px; margin: 16px; color: #1a202c; }
h1 { font-size: 20px; } h2 { font-size: 17px; margin-top: 28px; } h3 { font-size: 15px; margin-bottom: 4px; }
table { border-collapse: collapse; margin: 6px 0 12px; }
th, td { border-bottom: 1px solid #e2e8f0; padding: 3px 10px; text-align: left; }
td.number, th.number { text-align: right; font-variant-numeric: tabular-nums; }
.muted { color: #718096; } .unreachable, .row-error { color: #c53030; }
.unreachable { border: 1px solid #c53030; background: #fff5f5; padding: 8px; }
td.ranges, td.planned, td.committed, td.acked { white-space: nowrap; }
.estimated { font-style: italic; } .state-acked { color: #2f855a; } .state-planned { color: #b7791f; }
svg.backlog-chart { border: 1px solid #e2e8f0; margin: 4px 0 12px; }
svg .axis { stroke: #a0aec0; } svg .backlog { fill: none; stroke: #3182ce; stroke-width: 2; }
svg circle.exact { fill: #3182ce; } svg circle.estimated { fill: white; stroke: #3182ce; }
svg text { font-size: 10px; fill: #4a5568; }
"""
_ROUTE_SCRIPT = """
document.addEventListener("click", (event) => {
  const link = event.target.closest("a[data-route]");
  if (!link || window.top === window) return;
  event.preventDefault();
  window.top.history.pushState(null, "", link.getAttribute("href"));
  window.top.dispatchEvent(new PopStateEvent("popstate"));
});
"""
_STATE_NAMES = {"planned": "planned", "committed": "committed", "acked": "acknowledged"}


def render_page(overviews: Sequence[ConnectionOverview], series: Mapping[str, Series], refresh: int) -> str:
    """The whole page; ``series`` gives each connection's recorded backlog readings."""
    head = f'<meta http-equiv="refresh" content="{refresh}">' if refresh > 0 else ""
    body = "".join(_connection(overview, series.get(overview.conn_id, {})) for overview in overviews)
    if not overviews:
        body = '<p class="muted">No connection of type pulsar that you may read.</p>'
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Pulsar</title>{head}'
        f"<style>{_STYLE}</style><script>{_ROUTE_SCRIPT}</script></head><body><h1>Pulsar</h1>{body}</body></html>"
    )


def render_refusal(message: str) -> str:
    """The page a user who may not read connections gets (with status 403)."""
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Pulsar</title><style>{_STYLE}</style></head>'
        f'<body><h1>Pulsar</h1><p class="refused" role="alert">{escape(message)}</p></body></html>'
    )


def _connection(overview: ConnectionOverview, series: Series) -> str:
    header = (
        f'<h2>{escape(overview.conn_id)} <span class="muted">{escape(overview.admin_url)}</span></h2>'
        f'<p class="muted read-at">read {clock(overview.read_at)} UTC in {overview.elapsed * 1000:.0f} ms</p>'
    )
    if overview.error is not None:
        where = escape(overview.admin_url or "?")
        body = f'<p class="unreachable" role="alert">Cannot read the admin API at {where}: {escape(overview.error)}</p>'
    else:
        body = _topics(overview.topics) + _subscriptions(overview.topics) + _dead_letters(overview.topics)
        body += _charts(series, overview.batches) + _batches(overview.batches)
    return f'<section class="connection" data-conn-id="{escape(overview.conn_id)}">{header}{body}</section>'


def _table(kind: str, headers: Iterable[str], rows: Iterable[str], empty: str) -> str:
    rows = list(rows)
    if not rows:
        return f'<p class="muted {kind}-none">{escape(empty)}</p>'
    cells = "".join(f'<th class="number">{escape(h[1:])}</th>' if h.startswith("#") else f"<th>{escape(h)}</th>" for h in headers)
    return f'<table class="{kind}"><thead><tr>{cells}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _cell(kind: str, value: object, number: bool = False, title: str | None = None) -> str:
    classes = f"{kind} number" if number else kind
    tip = f' title="{escape(title)}"' if title else ""
    return f'<td class="{classes}"{tip}>{escape(str(value))}</td>'


def _topics(topics: Sequence[TopicFigures]) -> str:
    rows = (
        f'<tr data-topic="{escape(t.name)}">{_cell("topic", t.name)}{_cell("partitions", t.partitions or "-", True)}'
        f'{_cell("rate-in", f"{t.rate_in:.1f}", True)}{_cell("rate-out", f"{t.rate_out:.1f}", True)}'
        f'{_cell("storage", t.storage_size, True)}{_cell("row-error", t.error or "")}</tr>'
        for t in topics
    )
    headers = ("topic", "#partitions", "#in msg/s", "#out msg/s", "#stored bytes", "")
    return "<h3>Topics</h3>" + _table("topics", headers, rows, "No topics in the watched namespaces.")


def _subscriptions(topics: Sequence[TopicFigures]) -> str:
    rows = (_subscription(sub) for topic in topics for sub in topic.subscriptions)
    headers = (
        "topic", "subscription", "type", "#backlog (messages)", "counted", "#entries",
        "#oldest waiting", "#consumers", "#out msg/s", "#unacked", "",
    )  # fmt: skip
    return "<h3>Subscriptions</h3>" + _table("subscriptions", headers, rows, "No subscriptions.")


def _subscription(sub: SubscriptionFigures) -> str:
    counted = "" if sub.exact is None else ("exact" if sub.exact else "estimated")
    # Pulsar names no type while no consumer is connected (null, or "None").
    kind = sub.type if sub.type not in ("", "None") else "-"
    messages = "?" if sub.messages is None else sub.messages
    return (
        f'<tr data-topic="{escape(sub.topic)}" data-subscription="{escape(sub.name)}">'
        f'{_cell("topic", sub.topic)}{_cell("subscription", sub.name)}{_cell("type", kind)}'
        f'{_cell("messages", messages, True)}{_cell(f"counted {counted}", counted)}{_cell("entries", sub.entries, True)}'
        f'{_cell("oldest-age", _duration(sub.oldest_age), True)}{_cell("consumers", sub.consumers, True)}'
        f'{_cell("rate-out", f"{sub.rate_out:.1f}", True)}{_cell("unacked", sub.unacked, True)}{_cell("row-error", sub.error or "")}</tr>'
    )


def _dead_letters(topics: Sequence[TopicFigures]) -> str:
    rows = (
        f'<tr data-topic="{escape(t.name)}">{_cell("topic", t.name)}'
        f'{_cell("stored-entries", "?" if t.stored_entries is None else t.stored_entries, True)}'
        f'{_cell("messages", sum(s.messages or 0 for s in t.subscriptions), True)}</tr>'
        for t in topics if t.dead_letter
    )  # fmt: skip
    headers = ("dead-letter topic", "#entries stored", "#backlog of its subscriptions (messages)")
    return "<h3>Dead-letter topics</h3>" + _table("dead-letters", headers, rows, "No dead-letter topics (names ending in -DLQ).")


def _charts(series: Series, batches: Sequence[IngestBatch]) -> str:
    figures = []
    for (topic, subscription), points in sorted(series.items()):
        title = f"{topic} / {subscription}"
        last = points[-1]
        caption = f"{escape(title)}: {len(points)} readings, last {last.messages} messages at {clock(last.read_at)} UTC"
        figures.append(
            f'<figure data-topic="{escape(topic)}" data-subscription="{escape(subscription)}">'
            f"{backlog_chart(title, points)}<figcaption>{caption}</figcaption></figure>"
        )
    recorded = {subscription for _, subscription in series}
    unrecorded = sorted({b.subscription for b in batches} - recorded)
    if unrecorded:
        figures.append(
            f'<p class="muted">No backlog readings recorded for the ingest subscription(s) {escape(", ".join(unrecorded))}: '
            "a backlog sensor on a subscription records its readings here.</p>"
        )
    body = "".join(figures) or '<p class="muted charts-none">No backlog readings recorded: backlog sensors and triggers record theirs.</p>'
    return "<h3>Backlog over time</h3>" + body


def _batches(batches: Sequence[IngestBatch]) -> str:
    tables = sorted({b.table for b in batches})
    if not tables:
        return '<h3>Ingest batches</h3><p class="muted batches-none">No plan logs (topics ending in -ingest-plans).</p>'
    parts = []
    for table in tables:
        rows = (_batch(b) for b in batches if b.table == table)
        headers = ("batch", "#sequence", "state", "#rows", "ranges (after .. through)", "planned", "committed", "acknowledged", "run")
        parts.append(f'<h4 data-table="{escape(table)}">Table {escape(table)}</h4>' + _table("batches", headers, rows, ""))
    return "<h3>Ingest batches</h3>" + "".join(parts)


def _batch(batch: IngestBatch) -> str:
    ranges = "<br>".join(
        f"{escape(_partition_label(r.topic))}: {escape(r.after)} .. {escape(r.through)}" + ("" if r.rows is None else f" ({r.rows} rows)")
        for r in batch.ranges
    )
    rows = "" if batch.rows is None else batch.rows
    # The link comes from the task's XCom once it finished; an acknowledged batch without one was
    # written outside Airflow, or its run was deleted.
    run = f'<td class="run muted">{"no task found" if batch.state == "acked" else "not finished yet"}</td>'
    if batch.run is not None:
        link = batch.run
        base = f"/dags/{quote(link.dag_id, safe='')}/runs/{quote(link.run_id, safe='')}"
        task = f"{base}/tasks/{quote(link.task_id, safe='')}" + (f"/mapped/{link.map_index}" if link.map_index >= 0 else "")
        run = (
            f'<td class="run"><a data-route href="{escape(base)}">{escape(link.dag_id)} / {escape(link.run_id)}</a>'
            f' <a data-route class="task" href="{escape(task)}">{escape(link.task_id)}</a></td>'
        )
    return (
        f'<tr data-batch-id="{escape(batch.batch_id)}">{_cell("batch-id", batch.batch_id)}{_cell("sequence", batch.sequence, True)}'
        f'{_cell(f"state state-{batch.state}", _STATE_NAMES[batch.state])}{_cell("rows", rows, True)}'
        f'<td class="ranges">{ranges}</td>{_cell("planned", _time(batch.planned_ms))}'
        f'{_cell("committed", _time(batch.committed_ms))}{_cell("acked", _time(batch.acked_ms))}{run}</tr>'
    )


def _partition_label(topic: str) -> str:
    """``partition 3`` for a partition of a partitioned topic, else the topic's local name."""
    local = topic.rsplit("/", 1)[-1]
    base, marker, index = local.rpartition("-partition-")
    return f"partition {index}" if marker and index.isdigit() else local


def _time(epoch_ms: int | None) -> str:
    return "" if epoch_ms is None else clock(epoch_ms / 1000)


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
