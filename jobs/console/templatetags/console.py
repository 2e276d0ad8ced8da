"""Template helpers shared by every console page: status pills, times, ids, JSON."""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django import template
from django.contrib.messages.storage.base import Message
from django.http import QueryDict
from django.utils import timezone
from django.utils.html import format_html, format_html_join, json_script
from django.utils.safestring import SafeString

from jobs import display, representation
from jobs.registry import registry

register = template.Library()


@register.simple_tag
def pill(state: str) -> SafeString:
    """A status pill: the colour says it at a glance, the text says it for everyone."""
    return format_html('<span class="pill pill-{}">{}</span>', state, display.label_of(state))


@register.simple_tag
def job_pill(job: Any) -> SafeString:
    return pill(display.job_display_state(job).name)


@register.filter
def submittable(job_type: str) -> bool:
    """`{% if job.type|submittable %}`: whether the New job form takes jobs of this type (the
    registry's submittable ones: not an internal type, nor one no handler is registered for)."""
    return job_type in registry.submittable()


@register.filter
def job_allows(job: Any, action: str) -> bool:
    """`{% if job|job_allows:"cancel" %}`: whether the job's display state allows it."""
    return display.job_display_state(job).allows(action)


@register.filter
def job_actions(job: Any) -> tuple[str, ...]:
    """The actions the job's display state allows, in the table's order."""
    return tuple(str(action) for action in display.job_display_state(job).actions)


@register.simple_tag
def display_states_script() -> SafeString:
    """The display-state table for console.js, as `<script id="display-states">` JSON."""
    return json_script(display.table_for_script(), "display-states")


@register.filter
def when(value: datetime | None) -> SafeString | str:
    """A time in the viewer's time zone: the clock for today, the date otherwise, with its
    year when it is not this year's (a month's history reaches back over New Year)."""
    if value is None:
        return "—"
    local = timezone.localtime(value)
    today = timezone.localtime(timezone.now()).date()
    if local.date() == today:
        shown = local.strftime("%H:%M:%S")
    elif local.year == today.year:
        shown = local.strftime("%b %d, %H:%M")
    else:
        shown = local.strftime("%b %d %Y, %H:%M")
    return format_html(
        '<time datetime="{}" title="{}">{}</time>',
        value.isoformat(),
        local.strftime("%Y-%m-%d %H:%M:%S %Z"),
        shown,
    )


# A time as `jobs.representation.format_time` writes it (UTC, to the millisecond): the
# sentences and details of `jobs.explain` hold their times so, for the API.
_WRITTEN_TIME = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)")


@register.filter
def local_times(text: str) -> SafeString:
    """`text` with each time written in it shown as `when` shows a time."""
    # Split by a group, which keeps what it matched: the times are the odd pieces.
    pieces = _WRITTEN_TIME.split(text)
    return format_html_join(
        "",
        "{}",
        (
            (when(datetime.fromisoformat(piece)) if n % 2 else piece,)
            for n, piece in enumerate(pieces)
        ),
    )


@register.filter
def full_time(value: datetime | None) -> str:
    if value is None:
        return "—"
    local = timezone.localtime(value)
    return f"{local:%Y-%m-%d %H:%M:%S}.{local.microsecond // 1000:03d} {local:%Z}"


register.filter("short_id", representation.short_id)
# Text a user or job code gave that a bidi control could make read as other text (a URL, an
# error, a job type: history may hold any).
register.filter("reveal_bidi", display.reveal_bidi)


@register.filter
def placed_at(messages: Iterable[Message], place: str) -> list[Message]:
    """The messages a view tagged with the id of the part of the page they are about
    (`extra_tags`), for the page to show them there; "" gives the untagged ones."""
    return [message for message in messages if (message.extra_tags or "") == place]


@register.filter
def pretty_json(value: Any) -> display.ShownJson:
    """The value pretty-printed, within the page's size bounds (`.text`, `.truncated`)."""
    return display.shown_json(value)


@register.filter
def about_unless_exact(number: int, exact: bool) -> str:
    """A count of a list (`BoundedCountPaginator`), said to be "about" when estimated."""
    return f"{number:,}" if exact else f"about {number:,}"


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
