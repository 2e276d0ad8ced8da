"""The Django admin: the second console, for triage.

Jobs are read-only here: every status change goes through `jobs.state`, so the admin has
no add, change or delete for jobs, and its actions (cancel on the job list, retry and purge
from the dead-letter queue) call the state module, never `.save()`. Acting needs Django
model permissions: cancel and retry need `jobs.change_job`, purge needs `jobs.delete_job`;
`jobs.view_job` lets a staff user look at jobs, the DLQ, attempts and logs.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any, ClassVar, cast

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.options import IS_POPUP_VAR, BaseModelAdmin, IncorrectLookupParameters
from django.contrib.admin.templatetags.admin_urls import add_preserved_filters
from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import (
    BooleanField,
    ExpressionWrapper,
    F,
    Field,
    Model,
    Q,
    QuerySet,
)
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from . import audit, queues, selectors, state, webhooks
from .display import Action, display_state, job_display_state, shown_json, with_queue_paused
from .filters import PRIORITY_CHOICES, SORT_ORDERS, list_order
from .models import (
    ApiToken,
    AuditEntry,
    DeadLetterJob,
    Job,
    JobAttempt,
    JobDependency,
    JobLog,
    JobStatus,
    Limit,
    Queue,
    Schedule,
    Webhook,
    Worker,
)
from .representation import SHORT_ID_DIGITS
from .schedules import upcoming_runs, with_current_run
from .selectors import BoundedCountPaginator

# A job's change page shows at most this many of its newest log lines...
LOG_LINES_SHOWN = 200
# ...of its newest attempts (twice the most a job may ask for: more come only from claims
# handed back or rescued)...
ATTEMPTS_SHOWN = 20
# ...and of its upstream jobs (a fan-in waits for up to `state.MAX_UPSTREAM`).
UPSTREAM_SHOWN = 50
# A confirmation page (`_ask_first`: a purge of dead letters, a delete of schedules) lists
# this many of the selected rows by name...
CONFIRM_LISTED = 50
# ...and posts back the id of each row it counts, so that the "yes" acts on those and on no
# row that matched after it was shown (a job that reached the DLQ, a schedule made). More ids
# than this would pass Django's bound on a form's fields (DATA_UPLOAD_MAX_NUMBER_FIELDS,
# 1,000): more is the console's bulk purge, or a narrower list.
CONFIRM_AT_ONCE = 500
# "Cancel selected jobs" cancels at most this many at once, each in its own transaction
# with its audit entry; more is the console's bulk cancel, which runs as a job in batches.
CANCEL_AT_ONCE = 500
# The stylesheet of the marks `JobAdmin.status_label` and `WorkerAdmin.heartbeat` put on a
# state (a class each: the CSP blocks style attributes).
_MARKS_CSS = {"all": ["jobs/admin.css"]}
# The hex digits of the beginning of a job's id, its dashes left out.
_ID_DIGITS = re.compile(r"[0-9a-f]{1,32}")
# An id's end is looked for among this many of a list's newest jobs, a range of the index
# of the list's order: no index holds an id's end, so each of them is read (57 ms among
# 1,000,000 jobs; reading them all took 0.5 s).
SHORT_ID_SEARCH_ROWS = 100_000


def _ticked(request: HttpRequest, matching: int) -> int:
    """How many rows the operator selected for an action: the ids ticked, or with "select
    all", the `matching` ones. The action's queryset holds only the rows still there (jobs
    still in the DLQ, schedules not deleted), so those gone since they were ticked are
    missing from it."""
    if request.POST.get("select_across") == "1":
        return matching
    return len(set(request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)))


def _ask_first(
    model_admin: admin.ModelAdmin,
    request: HttpRequest,
    queryset: QuerySet[Any],
    *,
    action: str,
    act: Callable[[], None],
    none_left: Callable[[int], None],
    too_many: str,
    template: str,
    title: str,
    shown: Callable[[Any], Any] = lambda row: row,
    said: Callable[[list[Any]], dict[str, Any]] = lambda selected: {},
) -> TemplateResponse | None:
    """The action `action`, asked first as Django's `delete_selected` asks: its page
    (`template`, which extends admin/jobs/confirm_selection.html) lists the selected rows
    (the first CONFIRM_LISTED, each as `shown`, with what `said` adds) and posts back the id
    of each, at most CONFIRM_AT_ONCE (past it `too_many` is said, and nothing done). Its "yes"
    runs `act` on the `queryset` those ids select: a "yes" naming none ("select all") would
    act on whatever matches at the click, rows added since among them, so it is asked again.
    Rows gone since they were ticked are left out, and when none is left, `none_left(ticked)`
    says so instead."""
    if request.POST.get("post") == "yes" and request.POST.get("select_across") != "1":
        act()
        return None
    selected = list(queryset.order_by().values_list("pk", flat=True)[: CONFIRM_AT_ONCE + 1])
    if len(selected) > CONFIRM_AT_ONCE:
        model_admin.message_user(request, too_many, messages.ERROR)
        return None
    total = len(selected)
    ticked = _ticked(request, total)
    if not total:
        none_left(ticked)
        return None
    context = {
        **model_admin.admin_site.each_context(request),
        "title": title,
        "opts": model_admin.model._meta,
        # In the list's order, as the operator saw them.
        "rows": [shown(row) for row in queryset.filter(pk__in=selected)[:CONFIRM_LISTED]],
        "total": total,
        "unlisted": max(total - CONFIRM_LISTED, 0),
        "ticked": ticked,
        "gone": ticked - total,
        # The "yes" confirms these: not the rows gone since they were ticked, which are gone
        # from the page too, nor those that match while the page is read.
        "selected": [str(pk) for pk in selected],
        "action": action,
        "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        "media": model_admin.media,
        **said(selected),
    }
    return TemplateResponse(request, template, context)


def _can_view_jobs(request: HttpRequest) -> bool:
    user = request.user
    return user.has_perm("jobs.view_job") or user.has_perm("jobs.change_job")


def _shown_job_id(request: HttpRequest) -> str | None:
    """The id of the job whose change page an inline is part of."""
    match = request.resolver_match
    return match.kwargs.get("object_id") if match else None


def _pretty_json(value: Any, raw_url: str) -> str:
    if value is None:
        return "-"
    shown = shown_json(value)
    if not shown.truncated:
        return format_html("<pre>{}</pre>", shown.text)
    return format_html(
        '<pre>{}</pre><p>Truncated. <a href="{}" download>Download the raw JSON</a></p>',
        shown.text,
        raw_url,
    )


def _can_be_key(field: Field[Any, Any], value: str) -> bool:
    """Whether the model would take `value` as `field`'s (its primary key's). One it would not
    names no row, and compared with the column it may fail the statement: a 500 for text that
    is no UUID or number, a number past the column's range, NUL in a queue's name."""
    try:
        field.clean(value, None)
    except ValidationError:
        return False
    return True


class OwnFiltersChangeList(ChangeList):
    """A list filtered by its own filters only. Django applies any lookup on a column typed
    into the list's address: a pattern the database cannot read (`?last_error__regex=(`)
    was a 500, and a lookup no index holds (`?last_error__icontains=`) read every job. (A
    date hierarchy's range is such a lookup too: none of these lists has one.)"""

    def get_filters(self, request: HttpRequest) -> Any:
        filters = super().get_filters(request)
        # What is left of the query once the filters took theirs (Django's own order).
        unknown = filters[2]
        if unknown:
            self.model_admin.message_user(
                request,
                f"This list has no filter {', '.join(sorted(unknown))}: it is shown unfiltered.",
                messages.ERROR,
            )
            # The admin's answer: the list again, unfiltered ("?e=1").
            raise IncorrectLookupParameters(f"No filter {', '.join(sorted(unknown))}.")
        return filters


class SchedulerModelAdmin(admin.ModelAdmin):
    """An admin of the scheduler's models: an address or a form typed by hand gets a
    message, never a 500."""

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return OwnFiltersChangeList

    def get_object(
        self, request: HttpRequest, object_id: str, from_field: str | None = None
    ) -> Any:
        # Django's "does not exist" for an id that cannot be: a NUL in a queue's name failed
        # the look-up.
        if from_field is None and not _can_be_key(self.opts.pk, object_id):
            return None
        return super().get_object(request, object_id, from_field)

    def response_action(
        self, request: HttpRequest, queryset: QuerySet[Any], *args: Any, **kwargs: Any
    ) -> HttpResponse | None:
        # Django finds the selected rows by comparing each value with the primary key in
        # the database; the selection is done in full or not at all.
        for value in request.POST.getlist(helpers.ACTION_CHECKBOX_NAME):
            if not _can_be_key(self.opts.pk, value):
                self.message_user(
                    request,
                    f"The selection holds {value[:40]!r}, which is no id of a "
                    f"{self.opts.verbose_name}: nothing was done.",
                    messages.ERROR,
                )
                return None
        return super().response_action(request, queryset, *args, **kwargs)


class ReadOnlyAdminMixin(BaseModelAdmin):
    """No add, change or delete here: jobs change only through `jobs.state`, workers and
    their records only through the worker. `can_delete_rows` opens deleting where it is an
    action of its own (revoking an API token)."""

    can_delete_rows = False

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return self.can_delete_rows and super().has_delete_permission(request, obj)


class _FixedChoiceFilter(admin.SimpleListFilter):
    """A filter of fixed choices (`lookups`), each a condition on the rows (`condition`):
    Django's filter for a field without choices is a DISTINCT over the whole table on every
    page of the list."""

    def condition(self, value: str) -> Q:
        raise NotImplementedError

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if not value:
            return queryset
        if value not in {str(choice) for choice, _ in self.lookup_choices}:
            # The admin's answer to a filter value that cannot be: the list with "?e=1".
            raise IncorrectLookupParameters(f"No {self.parameter_name} {value!r}.")
        return queryset.filter(self.condition(value))


class PriorityFilter(_FixedChoiceFilter):
    """Priorities 1..3 (a DISTINCT over the jobs: ~260 ms at a million rows)."""

    title = "priority"
    parameter_name = "priority__exact"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(str(value), label) for value, label in PRIORITY_CHOICES]

    def condition(self, value: str) -> Q:
        return Q(priority=int(value))


def stored_job_types(request: HttpRequest) -> list[str]:
    """The types of the jobs in the table (`selectors.stored_job_types`), read once a
    request: the type filter and the search both ask."""
    types: list[str] | None = getattr(request, "_job_types", None)
    if types is None:
        types = selectors.stored_job_types()
        request._job_types = types  # type: ignore[attr-defined]
    return types


class JobTypeFilter(admin.SimpleListFilter):
    """The types jobs have (`stored_job_types`)."""

    title = "type"
    parameter_name = "type"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(name, name) for name in stored_job_types(request)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        return queryset.filter(type=value) if value else queryset


class _ReadOnlyInline(ReadOnlyAdminMixin, admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = False

    def has_view_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return _can_view_jobs(request)


class _NewestRowsInline(_ReadOnlyInline):
    """A job's newest rows, at most `shown` of them, found by the model's index on
    `(job_id, newest_by)` and then read by the formset by their ids and that index's range.

    Both reads are bounded whatever the planner believes. Asked for inside the formset's
    query (`id IN (... LIMIT n)`, the formset adding its own `job_id` filter), the newest
    rows of a job missing from the statistics, so taken for a job of one row, were found by
    comparing each of its 100,000 log lines with each of the 200 newest: 5 s."""

    shown: int
    newest_by: str

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        queryset = super().get_queryset(request)
        job_id = _shown_job_id(request)
        if job_id is None:
            return queryset
        # The index's order alone: with the id as a tie-break, a planner that takes the job
        # for a small one sorts all of its rows.
        newest = list(
            self.model._default_manager.filter(job_id=job_id)
            .order_by(f"-{self.newest_by}")
            .values_list("id", self.newest_by)[: self.shown]
        )
        if not newest:
            return queryset.none()
        # The oldest row shown bounds the range too: by the ids alone, the formset's query
        # may read every row of the job by its `job_id` to pick them out.
        oldest_shown = newest[-1][1]
        return queryset.filter(
            id__in=[row_id for row_id, _ in newest], **{f"{self.newest_by}__gte": oldest_shown}
        )


class JobAttemptInline(_NewestRowsInline):
    model = JobAttempt
    shown = ATTEMPTS_SHOWN
    newest_by = "started_at"
    verbose_name_plural = f"attempts (newest {ATTEMPTS_SHOWN}, oldest first)"
    fields = readonly_fields = (
        "attempt_number",
        "status",
        "started_at",
        "finished_at",
        "duration_ms",
        "worker",
        "error_type",
        "error_message",
        "stack_trace",
    )
    ordering = ("attempt_number", "started_at")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        # Each attempt's worker read with it, not by itself.
        return super().get_queryset(request).select_related("worker")


class JobLogInline(_NewestRowsInline):
    model = JobLog
    shown = LOG_LINES_SHOWN
    newest_by = "created_at"
    verbose_name_plural = f"logs (newest {LOG_LINES_SHOWN} lines)"
    fields = readonly_fields = ("created_at", "level", "message", "from_attempt")
    ordering = ("created_at", "id")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        # The number of each line's attempt read with the line: the attempt itself ("attempt
        # 1 of <job id>", its stack trace and all) was read by itself, 200 more queries.
        return super().get_queryset(request).annotate(attempt_number=F("attempt__attempt_number"))

    # Not `attempt_number`, the attempts' column: the page marks each column by its name.
    @admin.display(description="attempt")
    def from_attempt(self, line: Any) -> int | None:
        return cast("int | None", line.attempt_number)


class JobDependencyInline(_ReadOnlyInline):
    """A job's upstream jobs, the unfinished first (what it waits for), at most
    UPSTREAM_SHOWN of them, each read along with its edge: a fan-in's page showed all 1,000
    and loaded each upstream job by itself, ~1,008 queries and 3 s."""

    model = JobDependency
    fk_name = "job"
    verbose_name_plural = "runs after"
    fields = readonly_fields = ("depends_on", "upstream_status", "created_at")
    ordering = (
        ExpressionWrapper(
            Q(depends_on__status=JobStatus.COMPLETED), output_field=BooleanField()
        ).asc(),
        "id",
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[JobDependency]:
        # The upstream job's payload and result can be large and are not shown.
        queryset = (
            super()
            .get_queryset(request)
            .select_related("depends_on")
            .only("job", "created_at", "depends_on__id", "depends_on__type", "depends_on__status")
        )
        job_id = _shown_job_id(request)
        if job_id is None:
            return queryset
        shown = queryset.filter(job_id=job_id).values("id")[:UPSTREAM_SHOWN]
        return queryset.filter(id__in=shown)

    def get_formset(self, request: HttpRequest, obj: Any = None, **kwargs: Any) -> Any:
        # Django makes the inlines anew for each request, so the heading is this job's.
        total = JobDependency.objects.filter(job=obj).count() if obj is not None else 0
        if total > UPSTREAM_SHOWN:
            self.verbose_name_plural = (
                f"runs after ({UPSTREAM_SHOWN} of {total} upstream jobs shown, unfinished "
                f"first: {total - UPSTREAM_SHOWN} more not shown)"
            )
        return super().get_formset(request, obj, **kwargs)

    @admin.display(description="status")
    def upstream_status(self, dependency: JobDependency) -> str:
        return str(JobStatus(dependency.depends_on.status).label)


def _jobs_beginning_with(term: str, types: list[str]) -> Q:
    """Jobs whose id or type begins with `term`, in any case, found by index look-ups. The
    types are matched here, among `types` (those jobs have, `stored_job_types`): `UPPER(type)
    LIKE 'TERM%'` holds no index and read every job, 0.65-0.73 s at a million. The beginning
    of an id is a range of the primary key, from the digits padded with 0s to the digits
    padded with fs."""
    lowered = term.lower()
    # No type matching is no job of a type (`type IN ()`: Django asks the database nothing).
    found = Q(type__in=[name for name in types if name.lower().startswith(lowered)])
    digits = lowered.replace("-", "")
    if _ID_DIGITS.fullmatch(digits):
        found |= Q(id__range=tuple(uuid.UUID(digits.ljust(32, pad)) for pad in "0f"))
    return found


def _jobs_ending_with(term: str, jobs: QuerySet[Job], newest_by: str) -> Q:
    """Jobs whose id ends with `term` (a short id as the console shows it), among the
    SHORT_ID_SEARCH_ROWS first of `jobs` in the order `newest_by` (descending, an index's).
    Looked up once, here, then named by id: the list's queries (its page, its count) stay
    look-ups of `jobs_pkey`."""
    ending = selectors.id_ends_with(term)
    if ending is None:
        return Q(pk__in=[])
    field = newest_by.removeprefix("-")
    nth = jobs.order_by(newest_by).values_list(field, flat=True)
    boundary = list(nth[SHORT_ID_SEARCH_ROWS - 1 : SHORT_ID_SEARCH_ROWS])
    newest = jobs.filter(**{f"{field}__gte": boundary[0]}) if boundary else jobs
    return Q(pk__in=list(newest.filter(ending).order_by().values_list("id", flat=True)))


class SortableByChangeList(OwnFiltersChangeList):
    """A list that sorts only by its `sortable_by` columns (those an index holds in order),
    also when another is asked for by hand in the query string (`?o=`): Django only stops
    offering the others."""

    def get_ordering_field(self, field_name: Callable[..., Any] | str) -> Any:
        if self.sortable_by is not None and field_name not in self.sortable_by:
            return None
        return super().get_ordering_field(field_name)


class JobChangeList(SortableByChangeList):
    """A list of jobs sorted by its columns as `GET /jobs` sorts (`jobs.filters.list_order`),
    so that a page reads the column's index: with Django's tie-break (`-pk` after the
    column), a sort by priority over a month of history sorted every job, 0.5 s a page, and
    a sort by worker 0.54 s."""

    def get_ordering(self, request: HttpRequest, queryset: QuerySet[Any]) -> list[Any]:
        ordering = super().get_ordering(request, queryset)
        # Django follows the chosen columns with the admin's own ordering (the queryset's)
        # and the primary key; `list_order` breaks the ties instead.
        keys = [key for key in ordering if isinstance(key, str) and key.lstrip("-") != "pk"]
        default = [str(key) for key in queryset.query.order_by]
        if len(keys) > len(default) and keys[len(keys) - len(default) :] == default:
            keys = keys[: len(keys) - len(default)]
        if keys and all(key.lstrip("-") in SORT_ORDERS for key in keys):
            return list_order(keys)
        return ordering


@admin.register(Job)
class JobAdmin(ReadOnlyAdminMixin, SchedulerModelAdmin):
    list_display = [
        "id",
        "type",
        "queue",
        "status_label",
        "priority",
        "attempts",
        "scheduled_at",
        "created_at",
        "worker",
    ]
    list_filter = ["status", JobTypeFilter, PriorityFilter, "in_dlq", "recur_interval"]
    sortable_by = ("id", "priority", "scheduled_at", "created_at")
    search_fields = ("type",)
    search_help_text = (
        "The beginning of a job's id (with or without dashes), or of a job type; or the "
        f"short id the console shows (an id's last {SHORT_ID_DIGITS} digits), among the "
        f"newest {SHORT_ID_SEARCH_ROWS:,} jobs."
    )
    list_select_related = ("worker",)
    list_per_page = 50
    # Skips a COUNT(*) of the whole table on every filtered page.
    show_full_result_count = False
    # Nor a COUNT(*) of the filtered rows (~600 ms at a million jobs).
    paginator = BoundedCountPaginator
    # Newest first, as an index holds them: a short id is looked for among the first rows.
    ordering: ClassVar[tuple[str]] = ("-created_at",)
    inlines = (JobDependencyInline, JobAttemptInline, JobLogInline)
    # The dead-letter queue's have their own (`DeadLetterJobAdmin`): a cancel takes none.
    actions: tuple[str, ...] = ("cancel_selected",)

    class Media:
        css = _MARKS_CSS

    fieldsets = (
        (
            None,
            {
                "fields": (
                    "id",
                    "type",
                    "queue",
                    "status_label",
                    "priority",
                    "attempts",
                    "recur_interval",
                    "worker",
                    "previous_run",
                )
            },
        ),
        ("Payload and outcome", {"fields": ("payload_pretty", "result_pretty", "last_error")}),
        (
            "Times",
            {
                "fields": (
                    "created_at",
                    "scheduled_at",
                    "run_at",
                    "started_at",
                    "next_retry_at",
                    "completed_at",
                    "cancelled_at",
                    "updated_at",
                )
            },
        ),
        (
            "Scheduling internals",
            {
                "classes": ("collapse",),
                "fields": (
                    "status",
                    "in_dlq",
                    "attempt_count",
                    "max_retries",
                    "virtual_deadline",
                    "pending_dependencies",
                    "current_attempt_id",
                ),
            },
        ),
    )

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return JobChangeList

    def get_queryset(self, request: HttpRequest) -> QuerySet[Job]:
        # `status_label` reads whether a pending job's queue is paused from the row: else
        # one query per pending job on a page.
        return with_queue_paused(super().get_queryset(request))

    def get_readonly_fields(self, request: HttpRequest, obj: Model | None = None) -> list[str]:
        # Everything: an edit here would bypass the state machine.
        extra = ["status_label", "attempts", "payload_pretty", "result_pretty"]
        return [f.name for f in Job._meta.fields] + extra

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
    ) -> tuple[QuerySet[Any], bool]:
        term = search_term.strip()
        if not term:
            return queryset, False
        jobs = self.get_queryset(request)
        types = stored_job_types(request)
        found = _jobs_beginning_with(term, types) | _jobs_ending_with(term, jobs, self.ordering[0])
        return queryset.filter(found), False

    @admin.display(description="status", ordering="status")
    def status_label(self, job: Job) -> str:
        # The stored status (what the filters use), then what it means where they differ.
        shown = job_display_state(job)
        label = str(JobStatus(job.status).label)
        if shown.name != job.status:
            label = f"{label} · {shown.phrase}"
        # The words carry the meaning; the state's class (jobs/admin.css) may add a colour.
        return format_html('<span class="state-{}">{}</span>', shown.name, label)

    @admin.display(description="attempts")
    def attempts(self, job: Job) -> str:
        return f"{job.attempt_count} / {job.max_retries}"

    @admin.display(description="payload")
    def payload_pretty(self, job: Job) -> str:
        return _pretty_json(job.payload, reverse("console:job-payload", args=[job.id]))

    @admin.display(description="result")
    def result_pretty(self, job: Job) -> str:
        return _pretty_json(job.result, reverse("console:job-result", args=[job.id]))

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        # As retrying a dead letter: a change of the jobs' status, through `jobs.state`.
        return request.user.has_perm("jobs.change_job")

    @admin.action(description="Cancel selected jobs", permissions=["cancel"])
    def cancel_selected(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        """Cancel each selected job that has not finished, as the console's Cancel does
        (`state.cancel`, one audit entry a job, and the jobs waiting on it cancelled too);
        say how many were cancelled and how many could not be."""
        selected = list(
            queryset.order_by().values_list("id", "status", "in_dlq")[: CANCEL_AT_ONCE + 1]
        )
        if len(selected) > CANCEL_AT_ONCE:
            self.message_user(
                request,
                f"More than {CANCEL_AT_ONCE:,} jobs selected: the admin cancels at most "
                f"{CANCEL_AT_ONCE:,} at once, and none was cancelled. Narrow the list, or "
                'use "Cancel all matching" in the console\'s ledger.',
                messages.ERROR,
            )
            return
        # The states a cancel applies to, as the console offers its Cancel (`jobs.display`).
        unfinished = [
            job_id
            for job_id, status, in_dlq in selected
            if display_state(status, in_dlq).allows(Action.CANCEL)
        ]
        done = 0
        refused: list[uuid.UUID] = []
        for job_id in unfinished:
            try:
                state.cancel(job_id, reason="Cancelled from the admin")
            except (state.InvalidStateError, state.JobNotFound):
                # Finished meanwhile, or cancelled with a selected job it waited on.
                refused.append(job_id)
            else:
                done += 1
        # A job cancelled because a job it waited on was is cancelled by this action too.
        done += Job.objects.filter(id__in=refused, status=JobStatus.CANCELLED).count()
        if done:
            self.message_user(request, f"Cancelled {done} job(s).", messages.SUCCESS)
        ticked = _ticked(request, len(selected))
        if done >= ticked:
            return
        if not done:
            text = (
                f"None of the {ticked} selected job(s) could be cancelled: they had already "
                "finished (completed, cancelled or in the dead-letter queue)."
            )
        else:
            text = (
                f"{ticked - done} of the {ticked} selected job(s) could not be cancelled: "
                "they had already finished (completed, cancelled or in the dead-letter "
                "queue)."
            )
        self.message_user(request, text, messages.WARNING)


@admin.register(DeadLetterJob)
class DeadLetterJobAdmin(JobAdmin):
    list_display = ["id", "type", "priority", "attempts", "error", "updated_at", "created_at"]
    list_filter = [JobTypeFilter, PriorityFilter]
    sortable_by = ("id", "priority", "updated_at", "created_at")
    ordering = ("-updated_at",)
    actions = ("retry_selected", "purge_selected")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Job]:
        return super().get_queryset(request).filter(in_dlq=True)

    def has_view_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return _can_view_jobs(request)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return _can_view_jobs(request)

    def has_retry_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("jobs.change_job")

    def has_purge_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("jobs.delete_job")

    @admin.display(description="last error")
    def error(self, job: Job) -> str:
        text = job.last_error or ""
        return text if len(text) <= 120 else text[:119] + "…"

    def _warn_of_jobs_that_left(
        self, request: HttpRequest, ticked: int, done: int, verb: str
    ) -> None:
        if ticked and done >= ticked:
            return
        if not ticked:
            text = f"No job in the DLQ matches any more: none was {verb}."
        elif not done:
            text = (
                f"The {ticked} selected job(s) had already left the DLQ (retried or purged "
                f"elsewhere): none was {verb}."
            )
        else:
            text = (
                f"{ticked - done} of the {ticked} selected job(s) had already left the DLQ "
                f"(retried or purged elsewhere): not {verb}."
            )
        self.message_user(request, text, messages.WARNING)

    def _act_on_selection(
        self,
        request: HttpRequest,
        queryset: QuerySet[Job],
        act: Callable[[list[uuid.UUID]], int],
        done: str,
        verb: str,
    ) -> None:
        """`act` on the selected jobs still in the DLQ: how many it changed (`done`, of
        `{n}`), and a warning naming those that had left it."""
        in_dlq = list(queryset.values_list("id", flat=True))
        ticked = _ticked(request, len(in_dlq))
        changed = act(in_dlq)
        if changed:
            self.message_user(request, done.format(n=changed), messages.SUCCESS)
        self._warn_of_jobs_that_left(request, ticked, changed, verb)

    @admin.action(description="Retry selected", permissions=["retry"])
    def retry_selected(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        self._act_on_selection(
            request,
            queryset,
            lambda job_ids: len(state.retry_many_from_dlq(job_ids)),
            "Retried {n} job(s): back to pending with fresh attempts, due now.",
            "retried",
        )

    @admin.action(description="Purge selected", permissions=["purge"])
    def purge_selected(
        self, request: HttpRequest, queryset: QuerySet[Job]
    ) -> TemplateResponse | None:
        return _ask_first(
            self,
            request,
            queryset,
            action="purge_selected",
            act=lambda: self._act_on_selection(
                request,
                queryset,
                state.purge_many,
                "Purged {n} job(s) with their attempts and logs.",
                "purged",
            ),
            none_left=lambda ticked: self._warn_of_jobs_that_left(request, ticked, 0, "purged"),
            too_many=(
                f"More than {CONFIRM_AT_ONCE:,} jobs selected: the admin purges at most "
                f"{CONFIRM_AT_ONCE:,} at once, and none was purged. Narrow the list, or use "
                '"Purge all matching" in the console\'s dead-letter queue.'
            ),
            template="admin/jobs/deadletterjob/purge_confirmation.html",
            title="Purge dead-letter jobs?",
            said=lambda selected: {"dependents": _waiting_on(selected)},
        )


def _waiting_on(job_ids: list[uuid.UUID]) -> int:
    """How many unfinished jobs wait on `job_ids`: a purge of them cancels those."""
    return (
        Job.objects.filter(dependencies__depends_on__in=job_ids)
        .exclude(status__in=[JobStatus.COMPLETED, JobStatus.CANCELLED])
        .distinct()
        .count()
    )


def _no_next_run(schedule: Schedule) -> str:
    """Why a schedule lists no next run (`upcoming_runs`)."""
    return "paused" if schedule.paused else "held: its last run is a dead letter"


@admin.register(Schedule)
class ScheduleAdmin(ReadOnlyAdminMixin, SchedulerModelAdmin):
    """Cron schedules, read-only; pausing and resuming (`jobs.change_schedule`) go through
    `jobs.state`, which cancels or creates their runs."""

    list_display = ("type", "cron", "timezone", "paused", "next_run", "created_at")
    list_filter = ("paused", "timezone")
    readonly_fields = ("next_runs",)
    actions = ("pause_selected", "resume_selected", "delete_selected_schedules")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Schedule]:
        return with_current_run(super().get_queryset(request))

    def has_pause_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("jobs.change_schedule")

    def has_remove_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("jobs.delete_schedule")

    @admin.display(description="next run")
    def next_run(self, schedule: Schedule) -> str:
        upcoming = upcoming_runs(schedule)
        return upcoming[0].isoformat() if upcoming else _no_next_run(schedule)

    @admin.display(description="next runs")
    def next_runs(self, schedule: Schedule) -> str:
        upcoming = upcoming_runs(schedule)
        return ", ".join(slot.isoformat() for slot in upcoming) or _no_next_run(schedule)

    def _act_on_selection(
        self,
        request: HttpRequest,
        queryset: QuerySet[Schedule],
        act: Callable[[uuid.UUID], None],
        done: str,
        verb: str,
        already: str,
    ) -> None:
        """`act` on each selected schedule that still exists, and say what it changed: how
        many (`done`, of `{n}`), how many it found `already` so (a pause of a paused
        schedule, which the audit log does not record either), and which had been deleted
        elsewhere since they were ticked."""
        selected = list(queryset.values_list("id", flat=True))
        ticked = _ticked(request, len(selected))
        if not ticked:
            # "Select all" over a list that matches none any more.
            text = f"No schedule matches any more: none was {verb}."
            self.message_user(request, text, messages.WARNING)
            return
        changed = unchanged = 0
        for schedule_id in selected:
            with transaction.atomic():
                # Locked before it is read, as `act` locks it (its runs, then its row: the
                # order of a completion): what `act` found and left is then its own doing,
                # not a pause from elsewhere meanwhile. The schedule's row first deadlocked
                # with a completion of its run.
                try:
                    state.locked_schedule(schedule_id)
                except state.ScheduleNotFound:
                    continue  # deleted since it was read above
                before = _schedule_state(schedule_id)
                act(schedule_id)
                if _schedule_state(schedule_id) == before:
                    unchanged += 1
                else:
                    changed += 1
        if changed:
            self.message_user(request, done.format(n=changed), messages.SUCCESS)
        if unchanged == ticked:
            text = (
                f"The {ticked} selected schedule(s) {_was(ticked)} already {already}: "
                "nothing changed."
            )
            self.message_user(request, text, messages.INFO)
        elif unchanged:
            text = (
                f"{unchanged} of the {ticked} selected schedule(s) {_was(unchanged)} already "
                f"{already}: left as {'it was' if unchanged == 1 else 'they were'}."
            )
            self.message_user(request, text, messages.INFO)
        deleted = ticked - changed - unchanged
        if deleted <= 0:
            return
        if deleted < ticked:
            text = (
                f"{deleted} of the {ticked} selected schedule(s) had been deleted "
                f"elsewhere since: not {verb}."
            )
        else:
            text = (
                f"The {ticked} selected schedule(s) had been deleted elsewhere since: none "
                f"was {verb}."
            )
        self.message_user(request, text, messages.WARNING)

    @admin.action(description="Pause selected", permissions=["pause"])
    def pause_selected(self, request: HttpRequest, queryset: QuerySet[Schedule]) -> None:
        self._act_on_selection(
            request,
            queryset,
            state.pause_schedule,
            "Paused {n} schedule(s): their waiting runs were cancelled.",
            "paused",
            already="paused",
        )

    @admin.action(description="Resume selected", permissions=["pause"])
    def resume_selected(self, request: HttpRequest, queryset: QuerySet[Schedule]) -> None:
        # A running schedule whose series stopped (its run a dead letter, or purged) goes
        # on: a change, counted as resumed.
        self._act_on_selection(
            request,
            queryset,
            state.resume_schedule,
            "Resumed {n} schedule(s) from their next slot.",
            "resumed",
            already="running",
        )

    @admin.action(description="Delete selected (their past runs stay)", permissions=["remove"])
    def delete_selected_schedules(
        self, request: HttpRequest, queryset: QuerySet[Schedule]
    ) -> TemplateResponse | None:
        # Asked first: a delete ends each series, and no undo brings it back.
        def delete() -> None:
            self._act_on_selection(
                request,
                queryset,
                state.delete_schedule,
                "Deleted {n} schedule(s): their waiting runs were cancelled.",
                "deleted",
                already="deleted",
            )

        return _ask_first(
            self,
            request,
            queryset,
            action="delete_selected_schedules",
            act=delete,
            # What `_act_on_selection` says of schedules deleted elsewhere since.
            none_left=lambda ticked: delete(),
            too_many=(
                f"More than {CONFIRM_AT_ONCE:,} schedules selected: the admin deletes at most "
                f"{CONFIRM_AT_ONCE:,} at once, and none was deleted. Narrow the list (its "
                "filters), then delete them in turns."
            ),
            template="admin/jobs/schedule/confirm_delete.html",
            title="Delete schedules?",
            shown=lambda schedule: (schedule, self.next_run(schedule)),
        )


def _schedule_state(schedule_id: uuid.UUID) -> tuple[bool, Any] | None:
    """Whether a schedule is paused and its run waiting or running; None when it is gone.
    A pause, resume or delete changed something exactly when this differs after it."""
    schedule = with_current_run(Schedule.objects.filter(id=schedule_id)).only("paused").first()
    if schedule is None:
        return None
    return schedule.paused, getattr(schedule, "current_run_id", None)


def _was(count: int) -> str:
    return "was" if count == 1 else "were"


@admin.register(Queue)
class QueueAdmin(SchedulerModelAdmin):
    """Pause and resume queues (`jobs.queues`, which wakes the workers on a resume): by the
    actions, by a queue's page, or by adding a queue no operator has decided about yet."""

    list_display = ("name", "paused", "updated_at")
    list_filter = ("paused",)
    search_fields = ("name",)
    fields = ("name", "paused", "updated_at")
    readonly_fields = ("updated_at",)
    actions = ("pause_selected", "resume_selected")

    def get_readonly_fields(self, request: HttpRequest, obj: Model | None = None) -> Any:
        return ("name", "updated_at") if obj is not None else ("updated_at",)

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: Queue, form: Any, change: bool) -> None:
        (queues.pause if obj.paused else queues.resume)(obj.name)
        obj.refresh_from_db()
        # Said by `message_user` in place of Django's "The queue “emails (paused)” was
        # changed successfully", which names the queue by its state as well.
        request._queue_saved = _queues_set([obj.name], paused=obj.paused)  # type: ignore[attr-defined]

    def message_user(self, request: HttpRequest, message: Any, *args: Any, **kwargs: Any) -> None:
        message = getattr(request, "_queue_saved", None) or message
        request._queue_saved = None  # type: ignore[attr-defined]
        super().message_user(request, message, *args, **kwargs)

    def _set_selected(self, request: HttpRequest, queryset: QuerySet[Queue], paused: bool) -> None:
        """Pause or resume the selected queues, named as the console names them. A ticked
        name that is no queue of this list (typed by hand, or kept from another page) is
        named in a warning: it read "Paused ." as if something had been done."""
        names = list(queryset.values_list("name", flat=True))
        for name in names:
            (queues.pause if paused else queues.resume)(name)
        if names:
            self.message_user(request, _queues_set(names, paused=paused), messages.SUCCESS)
        verb = "paused" if paused else "resumed"
        if request.POST.get("select_across") == "1":
            if not names:
                text = f"No queue matches any more: none was {verb}."
                self.message_user(request, text, messages.WARNING)
            return
        ticked = dict.fromkeys(request.POST.getlist(helpers.ACTION_CHECKBOX_NAME))
        if missing := [name for name in ticked if name not in names]:
            which = "No queue" if len(missing) == 1 else "No queues"
            text = f"{which} {', '.join(missing)} in this list: not {verb}."
            self.message_user(request, text, messages.WARNING)

    @admin.action(description="Pause selected", permissions=["change"])
    def pause_selected(self, request: HttpRequest, queryset: QuerySet[Queue]) -> None:
        self._set_selected(request, queryset, paused=True)

    @admin.action(description="Resume selected", permissions=["change"])
    def resume_selected(self, request: HttpRequest, queryset: QuerySet[Queue]) -> None:
        self._set_selected(request, queryset, paused=False)


def _queues_set(names: list[str], *, paused: bool) -> str:
    """What pausing or resuming `names` did, in the console's words ("Queue emails paused:
    its jobs stay pending.")."""
    queue = f"Queue {names[0]}" if len(names) == 1 else f"Queues {', '.join(names)}"
    if not paused:
        return f"{queue} resumed."
    return f"{queue} paused: {'its' if len(names) == 1 else 'their'} jobs stay pending."


class LimitForm(forms.ModelForm):
    class Meta:
        model = Limit
        fields = ("scope", "name", "max_running", "max_starts", "period_seconds")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if self.instance.pk is not None:
            data.setdefault("scope", self.instance.scope)
            data.setdefault("name", self.instance.name)
        # A number its field refused was given all the same: its own error says what is
        # wrong with it, and the rules across the numbers ("max_running, max_starts, or
        # both"; max_starts with period_seconds) take it as given, not as missing.
        numbers = [
            1 if name in self.errors else data.get(name)
            for name in ("max_running", "max_starts", "period_seconds")
        ]
        errors = queues.limit_errors(data.get("scope", ""), data.get("name", ""), *numbers)
        for field, messages_ in errors.items():
            if field not in self.errors:
                self.add_error(field if field in self.fields else None, messages_)
        return data


@admin.register(Limit)
class LimitAdmin(SchedulerModelAdmin):
    """Limits across all workers (`jobs.queues.set_limit`, the rules of the API and console)."""

    form = LimitForm
    list_display = ("scope", "name", "max_running", "max_starts", "period_seconds", "updated_at")
    list_filter = ("scope",)
    search_fields = ("name",)
    readonly_fields = ("updated_at",)

    def get_readonly_fields(self, request: HttpRequest, obj: Model | None = None) -> Any:
        return ("scope", "name", "updated_at") if obj is not None else ("updated_at",)

    def save_model(self, request: HttpRequest, obj: Limit, form: Any, change: bool) -> None:
        queues.set_limit(
            obj.scope,
            obj.name,
            max_running=obj.max_running,
            max_starts=obj.max_starts,
            period_seconds=obj.period_seconds,
        )
        saved = Limit.objects.get(scope=obj.scope, name=obj.name)
        obj.pk, obj.updated_at = saved.pk, saved.updated_at

    # Removed through `jobs.queues`, like from the API and the console (the audit log too).
    def delete_model(self, request: HttpRequest, obj: Limit) -> None:
        queues.remove_limit(obj.scope, obj.name)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Limit]) -> None:
        for scope, name in queryset.values_list("scope", "name"):
            queues.remove_limit(scope, name)


@admin.register(Worker)
class WorkerAdmin(ReadOnlyAdminMixin, SchedulerModelAdmin):
    list_display = (
        "hostname",
        "pid",
        "status",
        "heartbeat",
        "scheduler",
        "concurrency",
        "serves",
        "jobs_done",
        "started_at",
    )
    list_filter = ("status", "hostname")
    ordering = ("-started_at",)

    class Media:
        css = _MARKS_CSS

    @admin.display(description="queues")
    def serves(self, worker: Worker) -> str:
        return str(worker.queue_selection)

    @admin.display(description="last heartbeat", ordering="heartbeat_at")
    def heartbeat(self, worker: Worker) -> str:
        age = (timezone.now() - worker.heartbeat_at).total_seconds()
        live = worker.status in ("running", "stopping")
        if live and age > settings.CONSOLE_STALE_WORKER_SECONDS:
            return format_html('<strong class="worker-stale">{}s ago · stale</strong>', int(age))
        return f"{int(age)}s ago"


class WebhookForm(forms.ModelForm):
    # Checked by webhooks.validate (clean), as the API and the console check it: Django's
    # URLField refused a host without a dot and took what no request could be sent to.
    url = forms.CharField(max_length=500, widget=forms.URLInput)
    event_types = forms.MultipleChoiceField(
        choices=[(t, t) for t in webhooks.DELIVERABLE_EVENT_TYPES],
        widget=forms.CheckboxSelectMultiple,
    )
    secret = forms.CharField(
        required=False,
        # As typed, as in the console's form: webhooks.validate refuses whitespace around it.
        strip=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="Signs every delivery (HMAC-SHA256). Leave empty to keep the current one.",
    )

    class Meta:
        model = Webhook
        fields = ("url", "event_types", "secret", "is_active")

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if not cleaned.get("secret") and self.instance.pk:
            cleaned["secret"] = Webhook.objects.get(pk=self.instance.pk).secret
        errors = webhooks.validate(
            cleaned.get("url"), cleaned.get("event_types"), cleaned.get("secret")
        )
        for name, problems in errors.items():
            if name not in self.errors:
                for problem in problems:
                    self.add_error(name, problem)
        return cleaned


@admin.register(Webhook)
class WebhookAdmin(SchedulerModelAdmin):
    form = WebhookForm
    list_display = ("url", "events", "is_active", "created_by", "created_at")
    # Django's own following of foreign keys leaves out a nullable one: an author a row.
    list_select_related = ("created_by",)
    list_filter = ("is_active",)
    actions = ("send_test_delivery",)

    @admin.display(description="events")
    def events(self, webhook: Webhook) -> str:
        return ", ".join(webhook.event_types)

    def save_model(self, request: HttpRequest, obj: Webhook, form: Any, change: bool) -> None:
        obj.secret = form.cleaned_data["secret"]
        if not change:
            obj.created_by = request.user  # type: ignore[assignment]
        obj.save()

    @admin.action(description="Send a test delivery", permissions=["change"])
    def send_test_delivery(self, request: HttpRequest, queryset: QuerySet[Webhook]) -> None:
        for webhook in queryset:
            job = webhooks.send_test(webhook)
            self.message_user(request, f"Test delivery to {webhook.url} queued as job {job['id']}.")


@admin.register(ApiToken)
class ApiTokenAdmin(ReadOnlyAdminMixin, SchedulerModelAdmin):
    """Tokens can be looked at and revoked (deleted); their hash is never shown. Each
    revocation is an audit entry (`token_revoke`, recorded by `jobs.audit` as it is deleted)."""

    can_delete_rows = True
    list_display = ("prefix", "user", "created_at", "last_used_at")
    search_fields = ("prefix", "user__username")
    list_select_related = ("user",)
    fields = readonly_fields = ("prefix", "user", "created_at", "last_used_at")

    def response_delete(self, request: HttpRequest, obj_display: str, obj_id: Any) -> HttpResponse:
        response = super().response_delete(request, obj_display, obj_id)
        if IS_POPUP_VAR in request.POST or not self.has_view_permission(request):
            return response
        # Back to the tokens: Django sends whoever may not change them (nobody may) to the
        # admin's index.
        tokens = reverse("admin:jobs_apitoken_changelist", current_app=self.admin_site.name)
        preserved: dict[str, Any] = {
            "preserved_filters": self.get_preserved_filters(request),
            "opts": self.opts,
        }
        return HttpResponseRedirect(add_preserved_filters(preserved, tokens))


class AuditActionFilter(_FixedChoiceFilter):
    """The actions an entry may record (`audit.ACTIONS`)."""

    title = "action"
    parameter_name = "action__exact"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(action, action) for action in audit.ACTIONS]

    def condition(self, value: str) -> Q:
        return Q(action=value)


class AuditPeriodFilter(_FixedChoiceFilter):
    """Recent entries, a range of `audit_log_at_idx`: a date hierarchy listed the days that
    have entries with a DISTINCT over the whole log (130-190 ms at 500,000 entries)."""

    title = "when"
    parameter_name = "period"
    PERIODS = {
        "1h": ("Past hour", timedelta(hours=1)),
        "24h": ("Past 24 hours", timedelta(days=1)),
        "7d": ("Past 7 days", timedelta(days=7)),
        "30d": ("Past 30 days", timedelta(days=30)),
    }

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(name, label) for name, (label, _) in self.PERIODS.items()]

    def condition(self, value: str) -> Q:
        return Q(at__gte=timezone.now() - self.PERIODS[value][1])


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyAdminMixin, SchedulerModelAdmin):
    """The audit log, read-only like the console's page: nobody edits or deletes an entry
    (the database refuses a change too); the pruner removes old ones. Its list reads the
    newest entries by `audit_log_at_idx` and never counts or scans the whole log."""

    list_display = ("at", "username", "source", "address", "action", "target", "count")
    # By time alone, which `audit_log_at_idx` holds in order: sorted by another column (the
    # username, the action...), every page sorted the whole log, 0.42-0.5 s at 500,000.
    sortable_by = ("at",)
    list_filter = (AuditPeriodFilter, AuditActionFilter, "source")
    search_fields = ("target",)
    search_help_text = "An exact target: a job id, webhook 3, queue emails, 12 jobs."
    ordering = ("-at", "-id")
    show_full_result_count = False
    paginator = BoundedCountPaginator
    fields = (
        "at",
        "username",
        "source",
        "address",
        "action",
        "target",
        "count",
        "summary",
        "before_json",
        "after_json",
    )
    readonly_fields = fields

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return SortableByChangeList

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
    ) -> tuple[QuerySet[Any], bool]:
        # As typed, so that `audit_log_target_idx` finds it: Django's "=target" compared
        # UPPER(target), which no index holds. Not the username either: no index holds it,
        # and an OR with it would read the whole log.
        term = search_term.strip()
        return (queryset.filter(target=term) if term else queryset), False

    @admin.display(description="before")
    def before_json(self, entry: AuditEntry) -> str:
        return _pretty_json(entry.before, "")

    @admin.display(description="after")
    def after_json(self, entry: AuditEntry) -> str:
        return _pretty_json(entry.after, "")
