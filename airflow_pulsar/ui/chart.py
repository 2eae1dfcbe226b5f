"""The backlog-over-time chart: inline SVG drawn on the server (the UI loads no script or font
from elsewhere), one polyline of the recorded message counts with its time and count range."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from html import escape

from airflow_pulsar.ui.history import Point

WIDTH, HEIGHT, MARGIN = 560, 140, 36


def backlog_chart(title: str, points: Sequence[Point]) -> str:
    """An ``<svg>`` of ``points`` (oldest first): messages over time, estimated readings hollow."""
    if not points:
        return ""
    first, last = points[0].read_at, points[-1].read_at
    span = max(last - first, 1e-9)
    top = max(max(point.messages for point in points), 1)

    def x(at: float) -> float:
        return MARGIN + (at - first) / span * (WIDTH - 2 * MARGIN) if len(points) > 1 else WIDTH / 2

    def y(messages: int) -> float:
        return HEIGHT - MARGIN + 10 - messages / top * (HEIGHT - MARGIN - 10)

    path = " ".join(f"{x(p.read_at):.1f},{y(p.messages):.1f}" for p in points)
    dots = "".join(
        f'<circle cx="{x(p.read_at):.1f}" cy="{y(p.messages):.1f}" r="2.5" class="{"exact" if p.exact else "estimated"}">'
        f"<title>{clock(p.read_at)} UTC: {p.messages} messages{'' if p.exact else ' (estimated)'}</title></circle>"
        for p in points
    )
    base = HEIGHT - MARGIN + 10
    return (
        f'<svg class="backlog-chart" role="img" aria-label="{escape(title)}" data-points="{len(points)}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}">'
        f'<line x1="{MARGIN}" y1="{base}" x2="{WIDTH - MARGIN}" y2="{base}" class="axis"/>'
        f'<line x1="{MARGIN}" y1="10" x2="{MARGIN}" y2="{base}" class="axis"/>'
        f'<text x="{MARGIN - 4}" y="14" text-anchor="end">{top}</text>'
        f'<text x="{MARGIN - 4}" y="{base}" text-anchor="end">0</text>'
        f'<text x="{MARGIN}" y="{HEIGHT - 4}">{escape(clock(first))}</text>'
        f'<text x="{WIDTH - MARGIN}" y="{HEIGHT - 4}" text-anchor="end">{escape(clock(last))} UTC</text>'
        f'<polyline points="{path}" class="backlog"/>{dots}</svg>'
    )


def clock(at: float) -> str:
    """Epoch seconds as ``MM-DD HH:MM:SS`` in UTC."""
    return datetime.fromtimestamp(at, timezone.utc).strftime("%m-%d %H:%M:%S")
