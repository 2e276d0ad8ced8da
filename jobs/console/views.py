"""The console's pages. Each view parses, calls `jobs.state` (or a selector), and renders.

Actions answer an HTMX request with the fragment to swap (the ledger row, with the error
in it when the action was refused), and a plain form post with a redirect, or with the
page re-rendered around the error. Refusals are never a blank page: a 409 says what the
job became, a 400 puts each message next to its field.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal
from zoneinfo import ZoneInfo

from django.contrib import messages
from django.http import Http404, HttpResponse, QueryDict
from django.shortcuts import redirect
from django.urls import reverse
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.http import url_has_allowed_host_and_scheme

from jobs import audit, bulk, display, queues, state, webhooks
from jobs.display import Action
from jobs.explain import explain
from jobs.filters import (
    DEFAULT_ORDERING,
    ORDERING_FIELDS,
    STATUS_CHOICES,
    TIME_FIELDS,
    JobFilter,
    repeated_parameters,
)
from jobs.graph import job_graph
from jobs.models import AuditSource, Job, JobStatus, RecurInterval, Webhook
from jobs.representation import short_id
from jobs.schedules import UPCOMING, schedule_list, upcoming_runs
from jobs.selectors import BoundedCountPaginator, stored_job_types
from jobs.stats import current_stats

from . import charts, selectors
from .access import ConsoleRequest, console_view, page, refuse, user_time_zone
from .forms import (
    PRIORITY_CHOICES,
    CreateJobForm,
    LimitForm,
    PayloadForm,
    PreferenceForm,
    WebhookForm,
    add_details,
)
from .graph_svg import graph_svg

POST = ("POST",)
ANY = ("GET", "POST")


# --- dashboard -------------------------------------------------------------------------------


@console_view()
def dashboard(request: ConsoleRequest) -> HttpResponse:
    return page(
        request,
        "console/dashboard.html",
        {
            "cards": selectors.stat_cards(),
            "active": selectors.active_jobs(),
            "insight": selectors.dlq_insight(),
            "nodes": selectors.node_health(),
            "feed": selectors.log_feed(),
            "retention": selectors.retention_status(),
        },
    )


DASHBOARD_PARTS: dict[str, tuple[str, Callable[[], dict[str, Any]]]] = {
    "active": ("console/partials/active_jobs.html", lambda: {"active": selectors.active_jobs()}),
    "dlq": ("console/partials/dlq_insight.html", lambda: {"insight": selectors.dlq_insight()}),
    "nodes": ("console/partials/nodes.html", lambda: {"nodes": selectors.node_health()}),
}


@console_view()
def dashboard_part(request: ConsoleRequest, part: str) -> HttpResponse:
    if part not in DASHBOARD_PARTS:
        return page(request, "console/404.html", {"what": "dashboard panel"}, status=404)
    template, context = DASHBOARD_PARTS[part]
    return page(request, template, context())


# --- the jobs ledger -------------------------------------------------------------------------


def _filter_params(query: QueryDict) -> QueryDict:
    """The ledger's query with its `datetime-local` bounds read in the viewer's time zone:
    JobFilter takes a naive time as UTC, the browser sends wall-clock time."""
    params = query.copy()
    for name in TIME_FIELDS:
        for bound in (f"{name}_before", f"{name}_after"):
            value = params.get(bound, "")
            try:
                parsed = datetime.fromisoformat(value) if "T" in value else None
            except ValueError:
                parsed = None
            if parsed is not None and parsed.tzinfo is None:
                params[bound] = timezone.make_aware(parsed).isoformat()
    return params


def _page_number(query: QueryDict) -> int:
    """The page of a list to show: the first unless `page` is one number from 1 (a page past
    the last is the last, from `get_page`). Django's `get_page` shows the last page for a
    number below 1 too, which over an estimated count means counting every match first."""
    given = query.getlist("page")
    number = given[0] if len(given) == 1 else ""
    return int(number) if number.isdecimal() and int(number) >= 1 else 1


def _repeated(query: QueryDict, *, several: Collection[str] = ()) -> dict[str, list[str]]:
    """The errors of the keys of `query` given more than once (`repeated_parameters`), but
    those that take `several` values, and `page`: any page that is not one number is the
    first (`_page_number`)."""
    return {
        name: problems
        for name, problems in repeated_parameters(query).items()
        if name != "page" and name not in several
    }


def _nothing_listed(request: ConsoleRequest, errors: dict[str, list[str]]) -> None:
    """Say why a list whose page has no field errors (the DLQ, the audit log) lists nothing
    for its query, as the ledger does for a filter given twice, rather than what the last
    value alone would list (and, on the DLQ, offer to act on)."""
    messages.error(request, f"Nothing is listed: {state.JobValidationError(errors)}")


_ORDERING_LABELS = {"virtual_deadline": "run order (virtual deadline)"}
# The ledger's filters but those on what a job is created with: a ledger filtered on those
# alone gains jobs by their creation only, under any of these (its status, a time a job's
# changes set) a job may come in or go out at each of its events.
_MOVING_FILTERS = set(JobFilter.base_filters) - {
    "type",
    "queue",
    "priority",
    "recur_interval",
    "created_after",
    "created_before",
    "ordering",
}


def _ledger_filter(request: ConsoleRequest) -> JobFilter:
    return JobFilter(
        _filter_params(request.GET), queryset=display.with_queue_paused(Job.objects.all())
    )


@console_view()
def ledger(request: ConsoleRequest) -> HttpResponse:
    filterset = _ledger_filter(request)
    unknown = JobFilter.unknown(request.GET, also=("page",))
    # A filter given twice is shown at its field over what its last value alone would say.
    errors = {**filterset.errors, **_repeated(request.GET), **unknown}
    valid = not errors
    paginator = BoundedCountPaginator(
        filterset.qs if valid else Job.objects.none(), request.preferences.page_size
    )
    page_obj = paginator.get_page(_page_number(request.GET))
    ordering = request.GET.get("ordering", "")
    return page(
        request,
        "console/ledger.html",
        {
            "page_obj": page_obj,
            "jobs": page_obj.object_list,
            "errors": errors,
            "unknown": sorted(unknown),
            "query": request.GET,
            "filters_active": any(
                k not in ("page", "ordering") and v for k, v in request.GET.items()
            ),
            "status_choices": STATUS_CHOICES,
            "priority_choices": PRIORITY_CHOICES,
            "type_choices": stored_job_types(),
            "interval_choices": RecurInterval.choices,
            "ordering_choices": [
                (
                    f"{sign}{field}",
                    f"{_ORDERING_LABELS.get(field, field.replace('_', ' '))} {arrow}",
                )
                for field in ORDERING_FIELDS
                for sign, arrow in (("-", "↓"), ("", "↑"))
            ],
            "time_open": any(
                request.GET.get(f"{name}_{bound}")
                for name in TIME_FIELDS
                for bound in ("before", "after")
            ),
            "time_fields": [(name, name.replace("_", " ").capitalize()) for name in TIME_FIELDS],
            # New jobs are prepended live only where they belong: newest first, first page.
            "live_prepend": page_obj.number == 1 and ordering in ("", DEFAULT_ORDERING),
            "live_moves": valid and any(request.GET.get(name) for name in _MOVING_FILTERS),
            # Only those that can apply to the jobs of the status filtered on.
            "bulk_actions": [
                name
                for name, action in bulk.ACTIONS.items()
                if not request.GET.get("status") or request.GET["status"] in action.statuses
            ],
        },
    )


@console_view()
def job_row(request: ConsoleRequest, job_id: uuid.UUID) -> HttpResponse:
    """One ledger row, for live updates. With `match=1` only if the job passes the ledger's
    filters (a new job prepended to a filtered ledger), else 204 and nothing is swapped."""
    if request.GET.get("match"):
        filterset = _ledger_filter(request)
        # The ledger lists nothing for a filter given twice: no row of it matches either.
        matches = filterset.is_valid() and not _repeated(request.GET)
        job = filterset.qs.filter(id=job_id).first() if matches else None
        if job is None:
            return HttpResponse(status=204)
    else:
        job = Job.objects.filter(id=job_id).first()
    if job is None:
        context = {"gone_id": job_id, "action_error": "This job was purged."}
        return page(request, "console/partials/job_row.html", context)
    return page(request, "console/partials/job_row.html", {"job": job})


# --- actions on one job ----------------------------------------------------------------------


def _moved_on(error: state.InvalidStateError) -> str:
    # A refusal names the job's stored status, or "dlq" for a dead letter.
    now = display.STATES.get(error.status) or display.display_state(error.status, in_dlq=False)
    return f"This job moved on: it is now {now.phrase}."


def _next_url(request: ConsoleRequest, default: str) -> str:
    target = request.POST.get("next", "")
    if url_has_allowed_host_and_scheme(target, {request.get_host()}, request.is_secure()):
        return target
    return default


@dataclass(frozen=True)
class _JobAction:
    perform: Callable[[uuid.UUID], object]
    done: str


_JOB_ACTIONS = {
    Action.CANCEL: _JobAction(
        lambda job_id: state.cancel(job_id, reason="Cancelled from the console"), "Job cancelled."
    ),
    Action.RETRY: _JobAction(
        state.retry_from_dlq, "Job retried: it left the dead-letter queue and is pending again."
    ),
    Action.PURGE: _JobAction(state.purge, "Job purged with its attempts and logs."),
}


@console_view(methods=POST, operator=True)
def job_action(request: ConsoleRequest, job_id: uuid.UUID, action: Action) -> HttpResponse:
    """Cancel, retry or purge one job (the route names the action)."""
    done = _JOB_ACTIONS[action].done
    try:
        _JOB_ACTIONS[action].perform(job_id)
    except state.InvalidStateError as error:
        return _refused(request, job_id, _moved_on(error), status=409)
    except state.JobNotFound:
        return _refused(request, job_id, "This job no longer exists.", status=404)
    if request.htmx:
        if action == Action.PURGE:
            return HttpResponse("")
        job = Job.objects.filter(id=job_id).first()
        context = {"job": job, "gone_id": job_id, "notice": done}
        return page(request, "console/partials/job_row.html", context)
    messages.success(request, done)
    if action == Action.PURGE:
        default = reverse("console:dlq")
    else:
        default = reverse("console:job-detail", args=[job_id])
    return redirect(_next_url(request, default))


def _refused(request: ConsoleRequest, job_id: uuid.UUID, message: str, status: int) -> HttpResponse:
    job = selectors.job_with_history(job_id)
    if request.htmx:
        return page(
            request,
            "console/partials/job_row.html",
            {"job": job, "gone_id": job_id, "action_error": message},
            status=status,
        )
    if job is None:
        return page(request, "console/404.html", {"what": "job", "message": message}, status=404)
    return _render_job(request, job, status=status, action_error=message)


# --- one job ---------------------------------------------------------------------------------


def _render_job(
    request: ConsoleRequest,
    job: Job,
    *,
    status: int = 200,
    action_error: str | None = None,
    edit_form: PayloadForm | None = None,
) -> HttpResponse:
    attempts = list(job.attempts.all())
    logs, logs_truncated = selectors.recent_logs(job)
    context: dict[str, Any] = {
        "job": job,
        "attempts": attempts,
        "logs": logs,
        "logs_truncated": logs_truncated,
        "graph": selectors.job_graph(job),
        "action_error": action_error,
    }
    if job.in_dlq:
        context["timeline"] = charts.retry_timeline(
            [
                charts.TimelineAttempt(
                    a.attempt_number, a.status, a.started_at, a.finished_at, a.error_type
                )
                for a in attempts
            ],
            end_label="DLQ",
            end_at=job.updated_at,
        )
        if edit_form is None:
            edit_form = PayloadForm.editing(job.payload)
        context["edit_form"] = edit_form
        return page(request, "console/dlq_detail.html", context, status=status)
    # DLQ Detail lists the jobs waiting on it and draws no graph.
    around = job_graph(job.id)
    if around is not None and len(around.nodes) > 1:
        context["graph_svg"] = graph_svg(
            around, lambda node_id: reverse("console:job-detail", args=[node_id])
        )
        context["graph_truncated"] = around.truncated
    context["explanation"] = explanation = explain(job.id)
    if explanation["reason"] == "waiting_for_upstream":
        # Those it waits for, as the sentence counts them; a join lists up to 1,000.
        waiting = [
            up for up in explanation["details"]["upstream"] if up["status"] != JobStatus.COMPLETED
        ]
        context["waiting_upstream"] = {
            "listed": waiting[: selectors.DEPENDENCIES_LISTED],
            "more": max(0, len(waiting) - selectors.DEPENDENCIES_LISTED),
            "total": len(waiting),
        }
    return page(request, "console/job_detail.html", context, status=status)


@console_view()
def job_page(request: ConsoleRequest, job_id: uuid.UUID, dlq: bool) -> HttpResponse:
    """Job Detail, or DLQ Detail for a dead letter: each sends a job to the other's page
    when it is (no longer) in the DLQ."""
    job = selectors.job_with_history(job_id)
    if job is None:
        message = f"No job with id {job_id}: it may have been purged."
        return page(request, "console/404.html", {"what": "job", "message": message}, status=404)
    if job.in_dlq and not dlq:
        return redirect("console:dlq-detail", job_id=job.id)
    if dlq and not job.in_dlq:
        messages.info(
            request,
            f"This job is not in the dead-letter queue: it is "
            f"{display.job_display_state(job).phrase}.",
        )
        return redirect("console:job-detail", job_id=job.id)
    return _render_job(request, job)


@console_view()
def job_json(
    request: ConsoleRequest, job_id: uuid.UUID, field: Literal["payload", "result"]
) -> HttpResponse:
    """A job's payload or result as stored, to download: the page may show it truncated."""
    raw = selectors.raw_json(job_id, field)
    if raw is None:
        message = f"No job with id {job_id}, or it has no {field}."
        return page(request, "console/404.html", {"what": field, "message": message}, status=404)
    response = HttpResponse(raw, content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="job-{job_id}-{field}.json"'
    return response


# --- create ----------------------------------------------------------------------------------


@console_view(methods=ANY)
def job_new(request: ConsoleRequest) -> HttpResponse:
    if request.method == "POST" and not request.can_act:
        return refuse(request)
    form = CreateJobForm(request.POST or None, initial=_prefill(request.GET))
    status = 200
    if request.method == "POST":
        if form.is_valid():
            data = form.cleaned_data
            try:
                job = state.enqueue(
                    data["type"],
                    data["payload"],
                    priority=data["priority"],
                    scheduled_at=data["scheduled_at"],
                    recur_interval=data["recur_interval"] or None,
                    max_retries=data["max_retries"],
                    depends_on=data["depends_on"],
                    cron=data["cron"] or None,
                    timezone=(data["timezone"] or None) if data["cron"] else None,
                    queue=data["queue"] or None,
                )
            except state.JobValidationError as error:
                add_details(form, error.details)
            else:
                messages.success(request, f"Job {short_id(job['id'])} created.")
                return redirect("console:job-detail", job_id=job["id"])
        status = 400
    return page(request, "console/job_new.html", {"form": form}, status=status)


def _prefill(query: QueryDict) -> dict[str, Any]:
    """`?depends_on=<id>` from a job's page starts a dependent job."""
    return {key: query[key] for key in ("type", "depends_on") if query.get(key)}


# --- the dead-letter queue -------------------------------------------------------------------


@console_view()
def dlq_overview(request: ConsoleRequest) -> HttpResponse:
    listed = True
    try:
        selection = _selection(request.GET, dlq=True)
    except state.JobValidationError as error:
        _nothing_listed(request, error.details)
        selection, listed = bulk.Selection(query={}, dlq=True), False
    try:
        jobs = selection.jobs().order_by("-updated_at", "id")
    except state.JobValidationError:
        # Only a hand-made URL gets here: the page's own links carry no job filter.
        selection = bulk.Selection(query={}, dlq=True)
        jobs = selection.jobs().order_by("-updated_at", "id")
    if not listed:
        jobs = jobs.none()
    narrowed = not listed or selection.signature is not None or bool(selection.search)
    # The whole DLQ is counted exactly by its counter, as the nav's badge: over the exact
    # count's limit the heading said "about 10,001" beside a badge of 10,030.
    total = current_stats()["dlq"]
    paginator = BoundedCountPaginator(
        jobs, request.preferences.page_size, known_count=None if narrowed else total
    )
    page_obj = paginator.get_page(_page_number(request.GET))
    tz = user_time_zone(request.preferences)
    return page(
        request,
        "console/dlq.html",
        {
            "page_obj": page_obj,
            "jobs": page_obj.object_list,
            "query": request.GET,
            "signature": selection.signature,
            "search": selection.search,
            "narrowed": narrowed,
            "listed": listed,
            "total": total,
            "groups": [
                (group, charts.sparkline(group.per_day, title=_per_day_title(group.per_day)))
                for group in selectors.dlq_groups(tz)
            ],
            "by_type": charts.bar_chart(
                selectors.failures_by_type(),
                title="Dead letters by job type",
                empty="No dead letters.",
            ),
            "by_error": charts.bar_chart(
                selectors.failures_by_error(),
                title="Dead letters by error",
                empty="No dead letters.",
            ),
            "over_time": charts.time_series(
                selectors.failures_over_time(tz, timezone.now()),
                title="Failed attempts per hour, last 24 hours",
                empty="No failed attempt in the last 24 hours.",
            ),
        },
    )


def _per_day_title(per_day: list[int]) -> str:
    return f"Dead letters per day, last {len(per_day)} days: {', '.join(map(str, per_day))}"


# The query parameters of a bulk selection that are not JobFilter's.
# The confirmation form's fields that are not the ledger's filter (its CSRF token included:
# taken for a filter, it failed every bulk job started from a browser).
_SELECTION_PARAMS = (
    "scope",
    "signature",
    "q",
    "page",
    "ordering",
    "as_of",
    "confirmed",
    "csrfmiddlewaretoken",
)


def _selection(data: QueryDict, *, dlq: bool) -> bulk.Selection:
    """The ledger's filter, or the DLQ narrowed to an error signature (`signature`; empty
    for the dead letters without one) and a search (`q`). Raises JobValidationError for a
    key given more than once (the `scope` and the form's own fields too): read as its last
    value, `status=pending&status=failed` cancelled only the failed jobs, and
    `scope=dlq&signature=...&scope=` purged every dead letter rather than one group."""
    if repeated := _repeated(data):
        raise state.JobValidationError(repeated)
    query = _filter_params(data)
    return bulk.Selection(
        query={k: str(v) for k, v in query.items() if k not in _SELECTION_PARAMS and v},
        dlq=dlq,
        signature=data.get("signature") if dlq and "signature" in data else None,
        search=data.get("q", "").strip() if dlq else "",
    )


def _not_done(request: ConsoleRequest, errors: dict[str, list[str]], to: str) -> HttpResponse:
    """A bulk action refused for its request (a filter or a field given more than once, one
    nothing takes, a value that is not valid): nothing counted or acted on, and why."""
    messages.warning(request, f"Nothing was done: {state.JobValidationError(errors)}")
    return redirect(to)


def _as_of(data: QueryDict) -> datetime | None:
    """When the confirmation page whose form this is counted what it acts on."""
    try:
        return parse_datetime(data.get("as_of", ""))
    except ValueError:
        return None


@console_view(methods=ANY, operator=True)
def bulk_action(request: ConsoleRequest, action: str) -> HttpResponse:
    """ "Retry / cancel / purge all N matching": a page with the exact count, then a POST
    that starts the action as a job of its own and goes to its page (progress in its log)."""
    if action not in bulk.ACTIONS:
        raise Http404(f"No bulk action {action!r}.")
    data = request.POST if request.method == "POST" else request.GET
    dlq = data.get("scope") == "dlq"
    try:
        selection = _selection(data, dlq=dlq)
        # The POST too, which its confirmation page checked: one sent without that page
        # started a bulk job bound to fail, and an audit entry said it was started.
        selection.jobs()
    except state.JobValidationError as error:
        return _not_done(request, error.details, "console:dlq" if dlq else "console:ledger")
    if request.method == "POST":
        as_of = _as_of(data)
        confirmed = data.get("confirmed", "")
        if as_of is None or not confirmed.isdigit():
            messages.warning(request, "Count the matching jobs first.")
            return redirect("console:dlq" if dlq else "console:ledger")
        selection = dataclasses.replace(selection, as_of=as_of)
        job = bulk.start(action, selection, int(confirmed))
        messages.success(
            request, f"Bulk {action} of {confirmed} job(s) started; its log shows the progress."
        )
        return redirect("console:job-detail", job_id=job["id"])
    # Counted as of the moment the action will take, so nothing can come between the two.
    as_of = timezone.now()
    count = bulk.count(action, dataclasses.replace(selection, as_of=as_of))
    hidden = [(k, v) for k, v in data.items() if k not in ("as_of", "confirmed")]
    return page(
        request,
        "console/bulk_confirm.html",
        {
            "action": action,
            "verb": bulk.ACTIONS[action].verb,
            "count": count,
            "hidden": hidden,
            "as_of": as_of.isoformat(),
            "danger": action != "retry",
            "back": reverse("console:dlq" if dlq else "console:ledger") + "?" + data.urlencode(),
        },
    )


@console_view(methods=POST, operator=True)
def dlq_edit(request: ConsoleRequest, job_id: uuid.UUID) -> HttpResponse:
    """Edit a dead letter's payload and retry it; the audit log keeps the old payload. A
    refused edit is the page again, with the operator's text and the errors under it."""
    form = PayloadForm(request.POST)
    if form.is_valid():
        try:
            state.retry_with_payload(job_id, form.cleaned_data["payload"])
        except state.JobValidationError as error:
            add_details(form, error.details)
        except state.InvalidStateError as error:
            messages.error(request, _moved_on(error))
            return redirect("console:job-detail", job_id=job_id)
        except state.JobNotFound:
            return redirect("console:dlq-detail", job_id=job_id)
        else:
            messages.success(request, "Payload saved; the job is pending again.")
            return redirect("console:job-detail", job_id=job_id)
    job = selectors.job_with_history(job_id)
    if job is None or not job.in_dlq:
        # Purged or retried meanwhile: its DLQ page says which.
        return redirect("console:dlq-detail", job_id=job_id)
    return _render_job(request, job, status=400, edit_form=form)


def _selected_ids(data: QueryDict) -> list[uuid.UUID] | None:
    """The ids picked in the DLQ table; None means the whole DLQ."""
    if data.get("all"):
        return None
    ids = []
    for raw in data.getlist("id"):
        try:
            ids.append(uuid.UUID(raw))
        except ValueError:
            continue
    return ids


# "Retry all" and "Empty the DLQ" take the dead letters their confirmation page counted: those
# unchanged since it was shown (its form's `as_of`), as the bulk actions do, never one that
# arrived while the operator read the page.


def _unconfirmed(request: ConsoleRequest, confirmation: str) -> HttpResponse:
    # A form without its page's moment (a page older than this rule, a hand-made request)
    # cannot say what the operator counted.
    messages.warning(request, "Nothing was done: confirm here, where the count is taken now.")
    return redirect(confirmation)


def _newer_left() -> str:
    """After an action on the whole DLQ as confirmed: the dead letters it left, which all
    arrived after the confirmation page."""
    left = current_stats()["dlq"]
    if not left:
        return ""
    return (
        f" {left} newer dead letter(s), which arrived after the confirmation page, were left "
        "in the queue."
    )


@console_view(methods=ANY, operator=True)
def dlq_bulk_retry(request: ConsoleRequest) -> HttpResponse:
    data = request.POST if request.method == "POST" else request.GET
    # The ticked rows are several `id`s; anything else given twice is refused, as a bulk
    # action's selection: `all=&all=1` was read as the whole DLQ.
    if repeated := _repeated(data, several=("id",)):
        return _not_done(request, repeated, "console:dlq")
    ids = _selected_ids(data)
    if ids == []:
        messages.warning(request, "Select the jobs to retry first.")
        return redirect("console:dlq")
    if request.method == "POST":
        targets = ids
        if targets is None:
            as_of = _as_of(data)
            if as_of is None:
                return _unconfirmed(request, reverse("console:dlq-retry") + "?all=1")
            targets = list(selectors.confirmed_dlq(as_of).values_list("id", flat=True))
        retried = state.retry_many_from_dlq(targets)
        moved = len(targets) - len(retried)
        note = f" {moved} had already left the dead-letter queue." if moved else ""
        left = _newer_left() if ids is None else ""
        messages.success(request, f"{len(retried)} job(s) back to pending.{note}{left}")
        return redirect("console:dlq")
    as_of = timezone.now()
    targets_qs = selectors.bulk_retry_targets(ids, as_of)
    return page(
        request,
        "console/confirm.html",
        {
            "title": "Retry dead letters",
            "question": "Give these jobs a fresh set of attempts, due now?",
            "count": targets_qs.count(),
            "sample": list(targets_qs[:20]),
            "ids": [str(i) for i in ids] if ids is not None else [],
            "all": ids is None,
            "as_of": as_of.isoformat(),
            "action": reverse("console:dlq-retry"),
            "confirm_label": "Retry now",
            "danger": False,
        },
    )


@console_view(methods=ANY, operator=True)
def dlq_empty(request: ConsoleRequest) -> HttpResponse:
    if request.method == "POST":
        if repeated := _repeated(request.POST):
            return _not_done(request, repeated, "console:dlq")
        as_of = _as_of(request.POST)
        if as_of is None:
            return _unconfirmed(request, reverse("console:dlq-empty"))
        purged = state.empty_dlq(list(selectors.confirmed_dlq(as_of).values_list("id", flat=True)))
        left = _newer_left()
        emptied = "" if left else "Dead-letter queue emptied: "
        messages.success(request, f"{emptied}{purged} job(s) purged.{left}")
        return redirect("console:dlq")
    as_of = timezone.now()
    jobs = selectors.confirmed_dlq(as_of)
    return page(
        request,
        "console/confirm.html",
        {
            "title": "Empty the dead-letter queue",
            "question": "Delete every dead letter with its attempts and logs? "
            "Jobs waiting on them are cancelled. This cannot be undone.",
            "count": jobs.count(),
            "sample": list(jobs[:20]),
            "all": True,
            "as_of": as_of.isoformat(),
            "action": reverse("console:dlq-empty"),
            "confirm_label": "Purge them all",
            "danger": True,
        },
    )


# --- schedules -------------------------------------------------------------------------------


@console_view()
def schedules(request: ConsoleRequest) -> HttpResponse:
    """Each cron schedule with its next runs written on its own clock, where cron reads them."""
    rows = [
        (
            schedule,
            [
                f"{slot.astimezone(ZoneInfo(schedule.timezone)):%a %Y-%m-%d %H:%M %Z}"
                for slot in upcoming_runs(schedule)
            ],
        )
        for schedule in schedule_list()
    ]
    return page(request, "console/schedules.html", {"schedules": rows, "upcoming": UPCOMING})


SCHEDULE_ACTIONS: dict[str, tuple[Callable[[uuid.UUID], None], str]] = {
    "pause": (state.pause_schedule, "Schedule paused."),
    "resume": (state.resume_schedule, "Schedule resumed."),
    "delete": (state.delete_schedule, "Schedule deleted: its past runs stay in the ledger."),
}


@console_view(methods=POST, operator=True)
def schedule_action(request: ConsoleRequest, schedule_id: uuid.UUID, action: str) -> HttpResponse:
    perform, done = SCHEDULE_ACTIONS[action]
    try:
        perform(schedule_id)
    except state.ScheduleNotFound:
        return page(request, "console/404.html", {"what": "schedule"}, status=404)
    messages.success(request, done)
    return redirect("console:schedules")


# --- settings --------------------------------------------------------------------------------


def _settings_page(
    request: ConsoleRequest,
    *,
    preference_form: PreferenceForm | None = None,
    webhook_form: WebhookForm | None = None,
    status: int = 200,
) -> HttpResponse:
    return page(
        request,
        "console/settings.html",
        {
            "configuration": selectors.running_configuration(),
            "preference_form": preference_form or PreferenceForm(instance=request.preferences),
            "webhook_form": webhook_form or WebhookForm(),
            "webhooks": list(Webhook.objects.order_by("-created_at")),
        },
        status=status,
    )


@console_view()
def settings_page(request: ConsoleRequest) -> HttpResponse:
    return _settings_page(request)


@console_view(methods=POST)
def save_preferences(request: ConsoleRequest) -> HttpResponse:
    """Anyone may set their own display preferences; it changes nothing for anyone else."""
    form = PreferenceForm(request.POST, instance=request.preferences)
    if not form.is_valid():
        return _settings_page(request, preference_form=form, status=400)
    form.save()
    messages.success(request, "Preferences saved.")
    return redirect("console:settings")


@console_view(methods=POST, operator=True)
def webhook_create(request: ConsoleRequest) -> HttpResponse:
    form = WebhookForm(request.POST)
    if form.is_valid():
        try:
            webhooks.create_webhook(
                url=form.cleaned_data["url"],
                event_types=form.cleaned_data["event_types"],
                secret=form.cleaned_data["secret"],
                user=request.user,
            )
        except state.JobValidationError as error:
            add_details(form, error.details)
        else:
            return _back_to(request, "settings", "webhooks", messages.SUCCESS, "Webhook added.")
    return _settings_page(request, webhook_form=form, status=400)


@console_view(methods=POST, operator=True)
def webhook_delete(request: ConsoleRequest, webhook_id: int) -> HttpResponse:
    webhooks.delete_webhook(webhook_id)
    return _back_to(request, "settings", "webhooks", messages.SUCCESS, "Webhook removed.")


@console_view(methods=POST, operator=True)
def webhook_test(request: ConsoleRequest, webhook_id: int) -> HttpResponse:
    webhook = Webhook.objects.filter(id=webhook_id).first()
    if webhook is None:
        return _back_to(
            request, "settings", "webhooks", messages.ERROR, "This webhook no longer exists."
        )
    job = webhooks.send_test(webhook)
    queued = f"Test delivery queued as job {short_id(job['id'])}."
    return _back_to(request, "settings", "webhooks", messages.SUCCESS, queued)


def _back_to(
    request: ConsoleRequest, page: str, section: str, level: int, message: str
) -> HttpResponse:
    """The console's `page` opened at its `section`, with the message in that section
    (tagged with its id): at the top of the page it was scrolled out of sight, on a phone by
    a screen."""
    messages.add_message(request, level, message, extra_tags=section)
    return redirect(reverse(f"console:{page}") + f"#{section}")


# --- audit log -------------------------------------------------------------------------------


@console_view()
def audit_log(request: ConsoleRequest) -> HttpResponse:
    """Every operator action, newest first; viewers read it too, nobody changes it."""
    filters = {
        name: request.GET.get(name, "").strip()
        for name in ("action", "source", "username", "target")
    }
    older = request.GET.get("older_than", "")
    if repeated := _repeated(request.GET):
        _nothing_listed(request, repeated)
        found = []
    else:
        found = audit.entries(**filters, older_than=int(older) if older.isdigit() else None)
    more = len(found) > audit.PAGE_SIZE
    shown = found[: audit.PAGE_SIZE]
    next_query = request.GET.copy()
    if more:
        next_query["older_than"] = str(shown[-1].id)
    return page(
        request,
        "console/audit.html",
        {
            "entries": shown,
            "query": filters,
            "filters_active": any(filters.values()),
            "action_choices": audit.ACTIONS,
            "source_choices": AuditSource.choices,
            "older_url": f"?{next_query.urlencode()}" if more else None,
            "retention": selectors.audit_retention(),
        },
    )


# --- queues and limits -------------------------------------------------------------------------


def _queues_page(
    request: ConsoleRequest, *, limit_form: LimitForm | None = None, status: int = 200
) -> HttpResponse:
    return page(
        request,
        "console/queues.html",
        {
            "queues": queues.queue_overviews(),
            "limits": queues.limit_usages(),
            "limit_form": limit_form or LimitForm(),
        },
        status=status,
    )


@console_view()
def queues_page(request: ConsoleRequest) -> HttpResponse:
    return _queues_page(request)


@console_view(methods=POST, operator=True)
def queue_pause(request: ConsoleRequest, name: str, paused: bool) -> HttpResponse:
    try:
        (queues.pause if paused else queues.resume)(name)
    except state.JobValidationError as error:
        messages.error(request, " ".join(m for ms in error.details.values() for m in ms))
    else:
        if paused:
            messages.success(request, f"Queue {name} paused: its jobs stay pending.")
        else:
            messages.success(request, f"Queue {name} resumed.")
    return redirect("console:queues")


@console_view(methods=POST, operator=True)
def limit_set(request: ConsoleRequest) -> HttpResponse:
    form = LimitForm(request.POST)
    if form.is_valid():
        try:
            queues.set_limit(**form.cleaned_data)
        except state.JobValidationError as error:
            add_details(form, error.details)
        else:
            saved = "Limit saved; every worker follows it from its next claim."
            return _back_to(request, "queues", "limits", messages.SUCCESS, saved)
    return _queues_page(request, limit_form=form, status=400)


@console_view(methods=POST, operator=True)
def limit_remove(request: ConsoleRequest, scope: str, name: str) -> HttpResponse:
    try:
        queues.remove_limit(scope, name)
    except state.JobValidationError as error:
        raise Http404("No limit can have this scope and name.") from error
    removed = f"Limit on {scope} {name} removed."
    return _back_to(request, "queues", "limits", messages.SUCCESS, removed)
