"""Template helpers shared by every console page: status pills, times, ids, JSON."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django import template
from django.http import QueryDict
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from jobs.console.selectors import display_state

register = template.Library()

STATE_LABELS = {
    "pending": "Pending",
    "blocked": "Blocked",
    "processing": "Processing",
    "completed": "Completed",
    "retrying": "Retrying",
    "dlq": "DLQ",
    "cancelled": "Cancelled",
    "succeeded": "Succeeded",
    "failed": "Failed",
    "running": "Running",
    "stopping": "Stopping",
    "stopped": "Stopped",
    "dead": "Dead",
    "stale": "Stale",
}


def state_label(state: str) -> str:
    return STATE_LABELS.get(state, state.replace("_", " ").capitalize())


@register.simple_tag
def pill(state: str) -> SafeString:
    """A status pill: the colour says it at a glance, the text says it for everyone."""
    return format_html('<span class="pill pill-{}">{}</span>', state, state_label(state))


@register.simple_tag
def job_pill(job: Any) -> SafeString:
    state = display_state(job.status, job.in_dlq, getattr(job, "pending_dependencies", 0))
    return pill(state)


@register.filter
def when(value: datetime | None) -> SafeString | str:
    """A time in the viewer's time zone: the clock for today, the date otherwise."""
    if value is None:
        return "—"
    local = timezone.localtime(value)
    today = timezone.localtime(timezone.now()).date()
    shown = local.strftime("%H:%M:%S") if local.date() == today else local.strftime("%b %d, %H:%M")
    return format_html(
        '<time datetime="{}" title="{}">{}</time>',
        value.isoformat(),
        local.strftime("%Y-%m-%d %H:%M:%S %Z"),
        shown,
    )


@register.filter
def full_time(value: datetime | None) -> str:
    if value is None:
        return "—"
    local = timezone.localtime(value)
    return f"{local:%Y-%m-%d %H:%M:%S}.{local.microsecond // 1000:03d} {local:%Z}"


@register.filter
def short_id(value: Any) -> str:
    return str(value)[:8]


@register.filter
def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


@register.filter
def priority_label(value: int) -> str:
    return {1: "1 · high", 2: "2 · normal", 3: "3 · low"}.get(value, str(value))


@register.filter
def duration(milliseconds: int | None) -> str:
    if milliseconds is None:
        return "—"
    if milliseconds < 1000:
        return f"{milliseconds} ms"
    return f"{milliseconds / 1000:.1f} s"


@register.simple_tag
def query_with(query: QueryDict, **changes: Any) -> str:
    """The current query string with some parameters replaced (pagination, ordering)."""
    updated = query.copy()
    for key, value in changes.items():
        if value in (None, ""):
            updated.pop(key, None)
        else:
            updated[key] = str(value)
    encoded = updated.urlencode()
    return f"?{encoded}" if encoded else "?"


@register.filter
def get_item(mapping: Any, key: str) -> Any:
    return mapping.get(key) if mapping else None


@register.filter
def make_list_of(value: Any) -> list[Any]:
    return [] if value is None else [value]
