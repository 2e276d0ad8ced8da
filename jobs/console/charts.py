"""Charts drawn on the server as inline SVG: readable without JavaScript, themed by CSS.

Every chart has a `<title>` and text labels for its values, so the numbers are there for a
screen reader and for a page saved without its scripts. Colours come from classes that
`static/console.css` styles for the light and the dark theme.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from jobs.display import reveal_bidi

# The retry timeline's natural width (px): the CSS lets it shrink, down to a floor, never grow.
WIDE = 960


def _truncate(text: str, length: int) -> str:
    return text if len(text) <= length else text[: length - 1] + "…"


def _svg(
    title: str, height: int, body: Sequence[str], css_class: str, width: int | None = None
) -> SafeString:
    """Without a `width`, a chart as wide as its panel whose bars are placed in % of it: its
    text keeps its CSS size at any width, where a viewBox scaled the DLQ's charts down with
    their panel (to 4 px on a phone). With one, a drawing scaled to fit (the timeline)."""
    box = (
        format_html(' viewBox="0 0 {} {}" preserveAspectRatio="xMinYMin meet"', width, height)
        if width
        else format_html(' height="{}"', height)
    )
    return format_html(
        '<svg class="chart {}"{} role="img" aria-label="{}"><title>{}</title>{}</svg>',
        css_class,
        box,
        title,
        title,
        mark_safe("".join(body)),  # noqa: S308 - every part below is built with format_html
    )


def _empty(message: str) -> SafeString:
    return format_html('<p class="chart-empty">{}</p>', message)


def bar_chart(
    items: Sequence[tuple[str, int]], *, title: str, empty: str = "Nothing to show."
) -> SafeString:
    """Horizontal bars, one per (label, value), largest first as given. Each label and its
    value stand on a line above their bar, which takes the whole width: beside it, a label
    column left a phone's bars no room."""
    if not items:
        return _empty(empty)
    row = 36
    top = max(value for _, value in items) or 1
    body = []
    for index, (written, value) in enumerate(items):
        # Labels are error signatures and types: text job code and users wrote.
        label = reveal_bidi(written)
        y = index * row
        body.append(
            format_html(
                '<g class="chart-row"><title>{}: {}</title>'
                '<text class="chart-label" x="0" y="{}">{}</text>'
                '<text class="chart-value" x="100%" y="{}" text-anchor="end">{}</text>'
                '<rect class="chart-bar" x="0" y="{}" width="{}%" height="12" rx="3"></rect></g>',
                label,
                value,
                y + 13,
                _truncate(label, 30),
                y + 13,
                value,
                y + 18,
                round(max(0.5, 100 * value / top), 2),
            )
        )
    return _svg(title, len(items) * row, body, "chart-bars")


def _clock(moment: datetime) -> tuple[datetime, str]:
    """`moment` on the viewer's clock, and the zone's abbreviation ("BST", "+11") if that
    clock reads the same time twice that day (the clocks put back), else ""."""
    local = timezone.localtime(moment)
    repeated = local.replace(fold=1 - local.fold).utcoffset() != local.utcoffset()
    return local, local.strftime("%Z") if repeated else ""


def time_series(
    buckets: Sequence[tuple[datetime, int]], *, title: str, empty: str = "Nothing to show."
) -> SafeString:
    """Vertical bars per time bucket (hours), with the local time a bar starts at under
    every few bars and the largest count above the top grid line. Positions are fractions
    of the width (%).

    A bar is named by the minute it starts: the hours are real ones, so where the clocks
    moved by half an hour within the day (Lord Howe) the bars before the change start at
    :30. A time the clocks repeat carries its zone, or the two hours put back would read
    alike; on the axis the zone takes a line of its own, as beside the hour it runs into
    the next label on a phone."""
    if not any(value for _, value in buckets):
        return _empty(empty)
    label_every = max(1, len(buckets) // 8)
    clocks = [_clock(moment) for moment, _ in buckets]
    zone_line = 12 if any(zone for _, zone in clocks[::label_every]) else 0
    height, axis, plot_top = 170 + zone_line, 22 + zone_line, 20
    plot_height = height - axis - plot_top
    step = 100 / len(buckets)
    top = max(value for _, value in buckets)
    body = [
        format_html(
            '<text class="chart-axis" x="0" y="12">{}</text>'
            '<line class="chart-grid" x1="0" y1="{}" x2="100%" y2="{}"></line>'
            '<line class="chart-grid" x1="0" y1="{}" x2="100%" y2="{}"></line>',
            top,
            plot_top,
            plot_top,
            plot_top + plot_height,
            plot_top + plot_height,
        )
    ]
    for index, ((_, value), (local, zone)) in enumerate(zip(buckets, clocks, strict=True)):
        x = (index + 0.1) * step
        bar = plot_height * value / top
        body.append(
            format_html(
                '<g class="chart-row"><title>{}: {}</title>'
                '<rect class="chart-bar" x="{}%" y="{}" width="{}%" height="{}" '
                'rx="2"></rect></g>',
                f"{local:%Y-%m-%d %H:%M} {zone}".rstrip(),
                value,
                round(x, 2),
                round(plot_top + plot_height - bar, 1),
                round(0.8 * step, 2),
                round(bar, 1),
            )
        )
        if index % label_every == 0:
            body.append(
                format_html(
                    '<text class="chart-axis" x="{}%" y="{}">{}{}</text>',
                    round(x, 2),
                    plot_top + plot_height + 18,
                    local.strftime("%H:%M"),
                    format_html('<tspan x="{}%" dy="12">{}</tspan>', round(x, 2), zone)
                    if zone
                    else "",
                )
            )
    return _svg(title, height, body, "chart-columns")


@dataclass(frozen=True)
class TimelineAttempt:
    number: int
    status: str
    started_at: datetime
    finished_at: datetime | None
    error_type: str | None


def retry_timeline(
    attempts: Sequence[TimelineAttempt], *, end_label: str, end_at: datetime
) -> SafeString:
    """Attempts on a time line: a block per attempt, the backoff wait between them, and the
    outcome (`end_label`, e.g. "DLQ") at `end_at`.

    Attempts are short next to the waits between them, so each gets a fixed block; the
    waits share the rest of the width by the square root of their length: backoff grows
    5x per attempt, and on a linear axis the first waits would vanish."""
    if not attempts:
        return _empty("No attempt yet.")
    ordered = sorted(attempts, key=lambda a: a.started_at)
    segments: list[tuple[str, float, TimelineAttempt | None]] = []
    cursor = ordered[0].started_at
    for current in ordered:
        gap = (current.started_at - cursor).total_seconds()
        if gap > 0:
            segments.append(("wait", gap, None))
        finished = current.finished_at or end_at
        segments.append(
            ("attempt", max(0.0, (finished - current.started_at).total_seconds()), current)
        )
        cursor = max(cursor, finished)
    left, right, block, min_wait = 8, 90, 16.0, 56.0
    waits = [duration**0.5 for kind, duration, _ in segments if kind == "wait"]
    room = WIDE - left - right - block * len(ordered)
    scale = room / sum(waits) if waits else 0.0
    widths = [
        block if kind == "attempt" else max(min_wait, duration**0.5 * scale)
        for kind, duration, _ in segments
    ]
    body = [
        format_html(
            '<line class="chart-grid" x1="{}" y1="46" x2="{}" y2="46"></line>',
            left,
            round(left + sum(widths), 1),
        )
    ]
    x = float(left)
    for (kind, duration, attempt), width in zip(segments, widths, strict=True):
        if kind == "wait":
            body.append(
                format_html(
                    '<g><title>waited {}</title><line class="timeline-wait" x1="{}" y1="46" '
                    'x2="{}" y2="46"></line><text class="chart-axis" x="{}" y="70" '
                    'text-anchor="middle">{}</text></g>',
                    _duration(duration),
                    round(x, 1),
                    round(x + width, 1),
                    round(x + width / 2, 1),
                    _duration(duration),
                )
            )
        elif attempt is not None:
            started = timezone.localtime(attempt.started_at).strftime("%H:%M:%S")
            body.append(
                format_html(
                    "<g><title>attempt {} {} at {} ({}){}</title>"
                    '<rect class="timeline-attempt timeline-{}" x="{}" y="34" width="{}" '
                    'height="24" rx="5"></rect>'
                    '<text class="chart-label" x="{}" y="24">#{} {}</text>'
                    '<text class="chart-axis" x="{}" y="88">{}</text></g>',
                    attempt.number,
                    attempt.status,
                    started,
                    _duration(duration),
                    f": {attempt.error_type}" if attempt.error_type else "",
                    attempt.status,
                    round(x, 1),
                    round(width, 1),
                    round(x, 1),
                    attempt.number,
                    attempt.status,
                    round(x, 1),
                    started,
                )
            )
        x += width
    body.append(
        format_html(
            '<g><title>{} at {}</title><circle class="timeline-end" cx="{}" cy="46" r="7">'
            '</circle><text class="chart-label" x="{}" y="51">{}</text></g>',
            end_label,
            timezone.localtime(end_at).strftime("%H:%M:%S"),
            round(x + 10, 1),
            round(x + 22, 1),
            end_label,
        )
    )
    return _svg(
        f"Retry timeline: {len(ordered)} attempts, then {end_label}", 96, body, "timeline", WIDE
    )


def _duration(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def sparkline(values: Sequence[int], *, title: str) -> SafeString:
    """A small line of `values` (oldest first), for a table cell; its title says the numbers."""
    width, height = 112, 24
    top = max(values, default=0) or 1
    step = width / max(1, len(values) - 1)
    points = " ".join(
        f"{round(i * step, 1)},{round(height - 2 - (height - 4) * v / top, 1)}"
        for i, v in enumerate(values)
    )
    return format_html(
        '<svg class="sparkline" viewBox="0 0 {} {}" width="{}" height="{}" role="img" '
        'aria-label="{}"><title>{}</title><polyline points="{}"></polyline></svg>',
        width,
        height,
        width,
        height,
        title,
        title,
        points,
    )
