"""The job routes of api.md. Each view parses, calls `jobs.state` or a selector, renders.

Domain errors (`JobValidationError`, `JobNotFound`, `InvalidStateError`) are not caught
here: `jobs.api.errors.exception_handler` turns them into the envelope.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.paginator import EmptyPage, Paginator
from django.http import HttpResponse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from prometheus_client.exposition import choose_encoder
from rest_framework import status
from rest_framework.authentication import SessionAuthentication
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.permissions import SAFE_METHODS, AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.utils.urls import replace_query_param
from rest_framework.views import APIView

from jobs import graph, metrics, queues, state
from jobs.explain import explain
from jobs.filters import repeated_parameters, unknown_parameters
from jobs.models import LimitScope
from jobs.queue_names import QUEUE_NAME_PATTERN
from jobs.registry import TYPE_NAME_PATTERN
from jobs.representation import format_time, represent_job
from jobs.schedules import get_schedule, represent_schedule, schedule_list
from jobs.selectors import job_attempts, job_list
from jobs.state import JobObject
from jobs.stats import current_stats

from .auth import BearerTokenAuthentication
from .errors import RETRY_AFTER_SECONDS, PayloadTooLarge, error_body
from .pagination import page_window, paginate
from .parsers import JSONBodyParser
from .probes import database_check, redis_status, require_database, unavailable_message
from .schema import (
    IDEMPOTENCY_CONFLICT,
    IDEMPOTENCY_KEY_PARAMETER,
    IDEMPOTENT_REPLAYED,
    JOB_ID_PARAMETER,
    JOB_LOCATION,
    READ_ERRORS,
    REPLAYED_HEADER,
    WRITE_ERRORS,
    declared_query_parameters,
    error_responses,
    list_parameters,
)
from .serializers import (
    LIMIT_SET_SCHEMA,
    AttemptSerializer,
    ExplanationSerializer,
    HealthSerializer,
    JobBatchCreateSerializer,
    JobBatchItemSerializer,
    JobBatchSerializer,
    JobCreateSerializer,
    JobGraphSerializer,
    JobPageSerializer,
    JobSerializer,
    LimitSerializer,
    LimitSetSerializer,
    PurgedSerializer,
    QueueSerializer,
    SchedulePageSerializer,
    ScheduleSerializer,
    StatsSerializer,
    flat_errors,
)

JOBS_TAG = ["jobs"]
SCHEDULES_TAG = ["schedules"]
QUEUES_TAG = ["queues"]


def parse_job_id(raw: str) -> uuid.UUID:
    try:
        return uuid.UUID(raw)
    except ValueError:
        raise state.JobValidationError({"id": [f"{raw!r} is not a valid UUID."]}) from None


def created_or_replayed(created: bool, headers: dict[str, str] | None = None) -> dict[str, Any]:
    """The status and headers of a creation's answer: 201, or 200 saying it is a replay of
    the first request under its `Idempotency-Key`."""
    if created:
        return {"status": status.HTTP_201_CREATED, "headers": headers}
    return {"status": status.HTTP_200_OK, "headers": {**(headers or {}), REPLAYED_HEADER: "true"}}


def refuse(errors: dict[str, list[str]]) -> None:
    if errors:
        raise state.JobValidationError(errors)


# What a job's spec holds for a field its form refused (missing, an internal type), so
# that the domain still checks the fields whose rules depend on it; what the domain says of a
# stand-in is dropped (the form's message for that field stands). A type no handler has
# leaves the payload to the rules of every type's. Any other field refused is left out, as if
# absent.
FORM_STAND_INS: dict[str, Any] = {"type": "", "payload": {}}


def job_errors(form: JobCreateSerializer, now: datetime) -> dict[str, list[str]]:
    """Every error of one job of a request, whichever stage finds it: the form's (DRF:
    unknown fields, types) and the domain's (`jobs.state`) in the fields the form took, so
    that no error waits for another to be fixed. In the order of the form's fields, then
    the fields it does not take."""
    if form.is_valid():
        refused: dict[str, list[str]] = {}
        taken = form.validated_data
    else:
        refused = flat_errors(form.errors)
        if not isinstance(form.initial_data, dict):
            return refused
        rest = type(form)(
            data={name: value for name, value in form.initial_data.items() if name not in refused},
            partial=True,
        )
        # Each field parses on its own: what parsed in the whole form parses here again.
        rest.is_valid(raise_exception=True)
        stand_ins = {
            name: value
            for name, value in FORM_STAND_INS.items()
            if name in refused and name in form.fields
        }
        taken = {**stand_ins, **rest.validated_data}
    # The domain's rules as `enqueue` and `enqueue_many` apply them, nothing created.
    domain = state.spec_errors(state.JobSpec(**taken), now)
    errors = {
        **refused,
        **{key: value for key, value in domain.items() if _field(key) not in refused},
    }
    position = {name: number for number, name in enumerate(form.fields)}
    return dict(
        sorted(errors.items(), key=lambda item: position.get(_field(item[0]), len(position)))
    )


def _field(key: str) -> str:
    """The field an error key names: `payload` for `payload.size.width`."""
    return key.partition(".")[0]


def batch_errors(batch: JobBatchCreateSerializer, now: datetime) -> dict[str, list[str]]:
    """The errors of a batch: the body's own, then each job's (`job_errors`), job by job.
    The jobs of a list refused as a whole (empty, too long) are not read."""
    errors = {
        key: messages
        for key, messages in flat_errors(batch.errors).items()
        if not key.startswith("jobs.")
    }
    jobs = batch.initial_data.get("jobs") if isinstance(batch.initial_data, dict) else None
    if "jobs" in errors or not isinstance(jobs, list):
        return errors
    for index, job in enumerate(jobs):
        form = JobBatchItemSerializer(data=job)
        errors.update(flat_errors(job_errors(form, now), f"jobs.{index}"))
    return errors


def idempotency_key(request: Request) -> tuple[str | None, dict[str, list[str]]]:
    """The request's `Idempotency-Key`, if it has one, and what is wrong with it: reported
    with the body's errors, so that neither waits for the other to be fixed."""
    key = request.headers.get("Idempotency-Key")
    return key, {} if key is None else state.idempotency_key_errors(key)


class ApiView(APIView):
    """Bearer tokens for clients, the session for the console and the browsable API (whose
    writes then need the CSRF token). Refuses a declared oversized body before
    authentication or parsing spend anything, and any query parameter the route does not
    take."""

    authentication_classes = [BearerTokenAuthentication, SessionAuthentication]
    parser_classes = [JSONBodyParser]

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        declared = request.META.get("CONTENT_LENGTH") or "0"
        if declared.isdigit() and int(declared) > settings.API_MAX_BODY_BYTES:
            raise PayloadTooLarge(settings.API_MAX_BODY_BYTES)
        super().initial(request, *args, **kwargs)
        # A method the route does not have stays a 405.
        method = str(request.method)
        if not hasattr(self, method.lower()):
            return
        # No write takes a query parameter: one sent is a client's mistake, refused before
        # anything changes (`DELETE /jobs/empty-dlq?type=...` emptied the whole DLQ).
        if method not in SAFE_METHODS:
            refuse(unknown_parameters(request.query_params, ()))
        refuse(repeated_parameters(request.query_params))
        # A read takes what its OpenAPI operation declares, and DRF's renderer choice (the
        # browsable API's links carry it): anything else answered as if absent, so
        # `/jobs/stats?type=noop` counted every job for a client that believed it filtered.
        if request.query_params:
            known = declared_query_parameters(self, method)
            refuse(unknown_parameters(request.query_params, known))


class JobListView(ApiView):
    @extend_schema(
        operation_id="jobs_list",
        tags=JOBS_TAG,
        summary="List jobs",
        description="Filters combine with AND. Time bounds are half-open: `<name>_after` "
        "includes its instant, `<name>_before` excludes it. Unknown parameters are a 400.",
        parameters=list_parameters(),
        responses={200: JobPageSerializer, **error_responses(400, 404, *READ_ERRORS)},
    )
    def get(self, request: Request) -> Response:
        return Response(paginate(job_list(request.query_params), request, represent_job))

    @extend_schema(
        operation_id="jobs_create",
        tags=JOBS_TAG,
        summary="Submit a job",
        request=JobCreateSerializer,
        parameters=[IDEMPOTENCY_KEY_PARAMETER, JOB_LOCATION, IDEMPOTENT_REPLAYED],
        responses={
            201: JobSerializer,
            200: OpenApiResponse(
                JobSerializer,
                description="A repeat under an `Idempotency-Key`: the job the first request "
                "created, as it is now.",
            ),
            409: IDEMPOTENCY_CONFLICT,
            **error_responses(400, 415, *WRITE_ERRORS),
        },
    )
    def post(self, request: Request) -> Response:
        serializer = JobCreateSerializer(data=request.data)
        key, wrong_key = idempotency_key(request)
        if not serializer.is_valid() or wrong_key:
            raise ValidationError({**job_errors(serializer, timezone.now()), **wrong_key})
        if key is None:
            job, created = state.enqueue(**serializer.validated_data), True
        else:
            job, created = state.enqueue_once(key, state.JobSpec(**serializer.validated_data))
        location = reverse("api-job-detail", kwargs={"job_id": job["id"]}, request=request)
        return Response(job, **created_or_replayed(created, {"Location": location}))


class JobBatchView(ApiView):
    @extend_schema(
        operation_id="jobs_create_batch",
        tags=JOBS_TAG,
        summary="Submit up to 1,000 jobs at once",
        description="All or none: every job is checked before any is created. Each job is "
        "what `POST /jobs` takes, except `depends_on` (submit a dependent job on its own). "
        "Errors name the job by its index, `jobs.3.priority`, every job's in the one answer. "
        "The body limit (`API_MAX_BODY_BYTES`) applies to the whole batch.",
        request=JobBatchCreateSerializer,
        parameters=[IDEMPOTENCY_KEY_PARAMETER, IDEMPOTENT_REPLAYED],
        responses={
            201: JobBatchSerializer,
            200: OpenApiResponse(
                JobBatchSerializer,
                description="A repeat under an `Idempotency-Key`: the jobs the first request "
                "created, in its order, as they are now (one purged or pruned since is left "
                "out).",
            ),
            409: IDEMPOTENCY_CONFLICT,
            **error_responses(400, 413, 415, *WRITE_ERRORS),
        },
    )
    def post(self, request: Request) -> Response:
        serializer = JobBatchCreateSerializer(data=request.data)
        key, wrong_key = idempotency_key(request)
        if not serializer.is_valid() or wrong_key:
            raise ValidationError({**batch_errors(serializer, timezone.now()), **wrong_key})
        specs = [state.JobSpec(**job) for job in serializer.validated_data["jobs"]]
        try:
            if key is None:
                jobs, created = state.enqueue_many(specs), True
            else:
                jobs, created = state.enqueue_many_once(key, specs)
        except state.JobValidationError as error:
            raise state.JobValidationError(
                {f"jobs.{field}": messages for field, messages in error.details.items()}
            ) from None
        return Response({"jobs": jobs}, **created_or_replayed(created))


class JobStatsView(ApiView):
    @extend_schema(
        operation_id="jobs_stats",
        tags=JOBS_TAG,
        summary="Count jobs by state",
        responses={200: StatsSerializer, **error_responses(*READ_ERRORS)},
    )
    def get(self, request: Request) -> Response:
        return Response(current_stats())


class MetricsView(ApiView):
    """Prometheus text, authenticated like every API read (a viewer's token will do)."""

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        # Before the token's statement, which would wait the pool's timeout for a connection
        # while PostgreSQL is away (DATABASE_POOL_TIMEOUT, 10 s by default): Prometheus gives
        # a scrape 10 s (`scrape_timeout`), so it timed out instead of reading the 503, and
        # held a request thread all along. A scrape waits as long as a probe.
        require_database()
        super().initial(request, *args, **kwargs)

    def perform_content_negotiation(self, request: Request, force: bool = False) -> Any:
        # The exposition format is prometheus_client's choice from Accept (text, or
        # OpenMetrics); the API's renderers, JSON only, would refuse a scraper that names
        # one (406). An error answer is still the JSON envelope.
        return super().perform_content_negotiation(request, force=True)

    @extend_schema(exclude=True)
    def get(self, request: Request) -> HttpResponse:
        encoder, content_type = choose_encoder(request.META.get("HTTP_ACCEPT", ""))
        return HttpResponse(encoder(metrics.registry), content_type=content_type)


class DlqListView(ApiView):
    @extend_schema(
        operation_id="jobs_dlq_list",
        tags=JOBS_TAG,
        summary="List the dead-letter queue",
        description="The same filters, ordering and pagination as `GET /jobs`.",
        parameters=list_parameters(),
        responses={200: JobPageSerializer, **error_responses(400, 404, *READ_ERRORS)},
    )
    def get(self, request: Request) -> Response:
        jobs = job_list(request.query_params, dlq_only=True)
        return Response(paginate(jobs, request, represent_job))


class EmptyDlqView(ApiView):
    @extend_schema(
        operation_id="jobs_empty_dlq",
        tags=JOBS_TAG,
        summary="Purge every job in the dead-letter queue",
        description="Jobs waiting on a purged job are cancelled.",
        request=None,
        responses={200: PurgedSerializer, **error_responses(*WRITE_ERRORS)},
    )
    def delete(self, request: Request) -> Response:
        return Response({"purged": state.empty_dlq()})


class JobDetailView(ApiView):
    @extend_schema(
        operation_id="jobs_retrieve",
        tags=JOBS_TAG,
        summary="Get a job",
        parameters=[JOB_ID_PARAMETER],
        responses={200: JobSerializer, **error_responses(400, 404, *READ_ERRORS)},
    )
    def get(self, request: Request, job_id: str) -> Response:
        return Response(state.get_job(parse_job_id(job_id)))


class JobAttemptsView(ApiView):
    @extend_schema(
        operation_id="jobs_attempts_list",
        tags=JOBS_TAG,
        summary="List a job's attempts, oldest first",
        description="`status` is `running` while an attempt is in progress.",
        parameters=[JOB_ID_PARAMETER],
        responses={
            200: AttemptSerializer(many=True),
            **error_responses(400, 404, *READ_ERRORS),
        },
    )
    def get(self, request: Request, job_id: str) -> Response:
        return Response(job_attempts(parse_job_id(job_id)))


class JobExplainView(ApiView):
    @extend_schema(
        operation_id="jobs_explain",
        tags=JOBS_TAG,
        summary="Why a job is not running (yet)",
        description="One plain sentence and the data behind it: finished, running, waiting "
        "for upstream jobs, scheduled for later, waiting for its retry, its queue paused, no "
        "live worker serving its queue, a full concurrency or rate limit on its type or queue, "
        "or due with N jobs ahead of it in run order.",
        parameters=[JOB_ID_PARAMETER],
        responses={200: ExplanationSerializer, **error_responses(400, 404, *READ_ERRORS)},
    )
    def get(self, request: Request, job_id: str) -> Response:
        return Response(explain(parse_job_id(job_id)))


class JobGraphView(ApiView):
    @extend_schema(
        operation_id="jobs_graph",
        tags=JOBS_TAG,
        summary="A job's dependency graph: upstream and downstream",
        description="Each direction is walked breadth-first up to `depth` steps (default "
        f"{graph.DEFAULT_DEPTH}, at most {graph.MAX_DEPTH}) and {graph.MAX_NODES} jobs in "
        "all; `truncated` says there is more beyond. A node's `level` is its distance: "
        "negative upstream, positive downstream. `waiting_on_dlq`: blocked by a job in the "
        "dead-letter queue, directly or through the blocked jobs between.",
        parameters=[
            JOB_ID_PARAMETER,
            OpenApiParameter(
                "depth",
                {"type": "integer", "minimum": 1, "maximum": graph.MAX_DEPTH},
                OpenApiParameter.QUERY,
            ),
        ],
        responses={200: JobGraphSerializer, **error_responses(400, 404, *READ_ERRORS)},
    )
    def get(self, request: Request, job_id: str) -> Response:
        job = parse_job_id(job_id)
        raw = request.query_params.get("depth", str(graph.DEFAULT_DEPTH))
        if not (raw.isascii() and raw.isdigit() and 1 <= int(raw) <= graph.MAX_DEPTH):
            message = f"An integer from 1 to {graph.MAX_DEPTH}."
            raise state.JobValidationError({"depth": [message]})
        found = graph.job_graph(job, int(raw))
        if found is None:
            raise state.JobNotFound(job)
        return Response(found.as_json())


class JobActionView(ApiView):
    """An operator action on one job: parse the id, run the transition, answer the job it
    left (or 204 where nothing is left). A refusal is the 409 of the error handler."""

    def act(self, job_id: str, perform: Callable[[uuid.UUID], JobObject | None]) -> Response:
        job = perform(parse_job_id(job_id))
        return Response(status=status.HTTP_204_NO_CONTENT) if job is None else Response(job)


def job_action_schema(
    action: str, summary: str, description: str, *, no_content: str | None = None
) -> Callable[[Callable[..., Response]], Callable[..., Response]]:
    """The schema of a `JobActionView` method: 200 with the job, or 204 `no_content`."""
    done: dict[int, Any] = (
        {200: JobSerializer}
        if no_content is None
        else {204: OpenApiResponse(description=no_content)}
    )
    return action_schema(
        f"jobs_{action}",
        JOBS_TAG,
        JOB_ID_PARAMETER,
        summary,
        description,
        {**done, **error_responses(400, 404, 409, *WRITE_ERRORS)},
    )


def action_schema(
    operation_id: str,
    tags: list[str],
    parameter: OpenApiParameter,
    summary: str,
    description: str,
    responses: dict[int, Any],
) -> Callable[[Callable[..., Response]], Callable[..., Response]]:
    """The schema of an action on one thing named in the path: no body, `responses`."""
    return extend_schema(
        operation_id=operation_id,
        tags=tags,
        summary=summary,
        description=description,
        parameters=[parameter],
        request=None,
        responses=responses,
    )


class JobCancelView(JobActionView):
    @job_action_schema(
        "cancel",
        "Cancel a pending, running or retry-waiting job",
        "Jobs waiting on it are cancelled too. Any request body is ignored.",
    )
    def post(self, request: Request, job_id: str) -> Response:
        return self.act(job_id, state.cancel)


class JobRetryView(JobActionView):
    @job_action_schema(
        "retry",
        "Retry a job from the dead-letter queue",
        "Back to pending with attempt_count 0, due now; its attempts are kept. Any request "
        "body is ignored: the job is retried with its own payload (the console's Edit and "
        "retry changes it first).",
    )
    def post(self, request: Request, job_id: str) -> Response:
        return self.act(job_id, state.retry_from_dlq)


class JobPurgeView(JobActionView):
    @job_action_schema(
        "purge",
        "Delete a dead-letter job with its attempts and logs",
        "Jobs waiting on it are cancelled.",
        no_content="Purged.",
    )
    def delete(self, request: Request, job_id: str) -> Response:
        return self.act(job_id, state.purge)


SCHEDULE_ID_PARAMETER = OpenApiParameter(
    "schedule_id",
    OpenApiTypes.UUID,
    OpenApiParameter.PATH,
    description="A schedule id; anything that is not a UUID is a 400.",
)


def _schedule(raw_id: str) -> dict[str, Any]:
    schedule_id = parse_job_id(raw_id)
    schedule = get_schedule(schedule_id)
    if schedule is None:
        raise state.ScheduleNotFound(schedule_id)
    return represent_schedule(schedule)


class ScheduleListView(ApiView):
    @extend_schema(
        operation_id="schedules_list",
        tags=SCHEDULES_TAG,
        summary="List cron schedules",
        description="Oldest first, each with its next 5 slots. A schedule is created by "
        "`POST /jobs` with `cron`.",
        parameters=[p for p in list_parameters() if p.name in ("page", "limit")],
        responses={200: SchedulePageSerializer, **error_responses(400, 404, *READ_ERRORS)},
    )
    def get(self, request: Request) -> Response:
        number, limit = page_window(request.query_params)
        paginator = Paginator(schedule_list(), limit)
        try:
            page = paginator.page(number)
        except EmptyPage:
            raise NotFound(f"Page {number} is past the end.") from None
        url = request.build_absolute_uri()
        return Response(
            {
                "count": paginator.count,
                "next": replace_query_param(url, "page", number + 1) if page.has_next() else None,
                "previous": replace_query_param(url, "page", number - 1)
                if page.has_previous()
                else None,
                "results": [represent_schedule(s) for s in page.object_list],
            }
        )


class ScheduleDetailView(ApiView):
    @extend_schema(
        operation_id="schedules_retrieve",
        tags=SCHEDULES_TAG,
        summary="Get a cron schedule",
        parameters=[SCHEDULE_ID_PARAMETER],
        responses={200: ScheduleSerializer, **error_responses(400, 404, *READ_ERRORS)},
    )
    def get(self, request: Request, schedule_id: str) -> Response:
        return Response(_schedule(schedule_id))

    @extend_schema(
        operation_id="schedules_destroy",
        tags=SCHEDULES_TAG,
        summary="Delete a cron schedule",
        description="Its waiting run is cancelled (`Schedule deleted.`); a run already running "
        "finishes and is the last. Its past runs stay, their `schedule_id` null.",
        parameters=[SCHEDULE_ID_PARAMETER],
        responses={
            204: OpenApiResponse(description="Deleted."),
            **error_responses(400, 404, *WRITE_ERRORS),
        },
    )
    def delete(self, request: Request, schedule_id: str) -> Response:
        state.delete_schedule(parse_job_id(schedule_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


def schedule_action_schema(
    action: str, summary: str, description: str
) -> Callable[[Callable[..., Response]], Callable[..., Response]]:
    return extend_schema(
        operation_id=f"schedules_{action}",
        tags=SCHEDULES_TAG,
        summary=summary,
        description=description,
        parameters=[SCHEDULE_ID_PARAMETER],
        request=None,
        responses={200: ScheduleSerializer, **error_responses(400, 404, *WRITE_ERRORS)},
    )


class SchedulePauseView(ApiView):
    @schedule_action_schema(
        "pause",
        "Pause a cron schedule",
        "Its waiting run is cancelled (`Schedule paused.`) and no run is created until it is "
        "resumed; a run already running finishes. Pausing a paused schedule changes nothing.",
    )
    def post(self, request: Request, schedule_id: str) -> Response:
        state.pause_schedule(parse_job_id(schedule_id))
        return Response(_schedule(schedule_id))


class ScheduleResumeView(ApiView):
    @schedule_action_schema(
        "resume",
        "Resume a paused cron schedule",
        "Its next run is its first slot after now: slots passed while paused are skipped. A "
        "schedule held by its last run in the DLQ (`next_runs` empty, not paused) starts "
        "again the same way; the dead letter stays, to be retried or purged.",
    )
    def post(self, request: Request, schedule_id: str) -> Response:
        state.resume_schedule(parse_job_id(schedule_id))
        return Response(_schedule(schedule_id))


QUEUE_NAME_PARAMETER = OpenApiParameter(
    "name", str, OpenApiParameter.PATH, description="A queue name.", pattern=QUEUE_NAME_PATTERN
)


def represent_queue(queue: dict[str, Any]) -> dict[str, Any]:
    return {**queue, "changed_at": format_time(queue["changed_at"])}


class QueueListView(ApiView):
    @extend_schema(
        operation_id="queues_list",
        tags=QUEUES_TAG,
        summary="List the queues",
        description="Every queue that has unfinished jobs or was ever paused or resumed, and "
        "`default`, by name, with its unfinished jobs counted by state.",
        responses={200: QueueSerializer(many=True), **error_responses(*READ_ERRORS)},
    )
    def get(self, request: Request) -> Response:
        return Response([represent_queue(queue) for queue in queues.queue_overviews()])


class QueueDetailView(ApiView):
    @extend_schema(
        operation_id="queues_retrieve",
        tags=QUEUES_TAG,
        summary="Get a queue",
        parameters=[QUEUE_NAME_PARAMETER],
        responses={200: QueueSerializer, **error_responses(404, *READ_ERRORS)},
    )
    def get(self, request: Request, name: str) -> Response:
        return Response(represent_queue(queues.queue_overview(name)))


def queue_action_schema(
    action: str, summary: str, description: str
) -> Callable[[Callable[..., Response]], Callable[..., Response]]:
    return action_schema(
        f"queues_{action}",
        QUEUES_TAG,
        QUEUE_NAME_PARAMETER,
        summary,
        description,
        {200: QueueSerializer, **error_responses(400, *WRITE_ERRORS)},
    )


class QueuePauseView(ApiView):
    @queue_action_schema(
        "pause",
        "Pause a queue",
        "No worker claims its jobs from the commit on; they stay pending, shown as paused. "
        "Running jobs finish, and so do those a worker had claimed ahead of a free thread "
        "(at most its `--prefetch`). Pausing a paused queue changes nothing; a queue no job names "
        "yet may be paused before its jobs arrive.",
    )
    def post(self, request: Request, name: str) -> Response:
        return Response(represent_queue(queues.pause(name)))


class QueueResumeView(ApiView):
    @queue_action_schema(
        "resume",
        "Resume a queue",
        "Workers load its jobs at once. Resuming a running queue changes nothing.",
    )
    def post(self, request: Request, name: str) -> Response:
        return Response(represent_queue(queues.resume(name)))


LIMITS_TAG = ["limits"]
LIMIT_PARAMETERS = [
    OpenApiParameter(
        "scope", str, OpenApiParameter.PATH, enum=LimitScope.values, description="What it limits."
    ),
    OpenApiParameter(
        "name",
        str,
        OpenApiParameter.PATH,
        description="A job type's name (1 to 100 characters, no control character; "
        "percent-encoded), or a queue's (1 to 100 letters, digits, '_', '-', '.' or ':').",
        pattern=TYPE_NAME_PATTERN,
    ),
]


def represent_limit(limit: dict[str, Any]) -> dict[str, Any]:
    return {**limit, "updated_at": format_time(limit["updated_at"])}


class LimitListView(ApiView):
    @extend_schema(
        operation_id="limits_list",
        tags=LIMITS_TAG,
        summary="List the limits, with their current use",
        description="Limits hold across all workers, enforced where jobs are claimed.",
        responses={200: LimitSerializer(many=True), **error_responses(*READ_ERRORS)},
    )
    def get(self, request: Request) -> Response:
        return Response([represent_limit(limit) for limit in queues.limit_usages()])


class LimitDetailView(ApiView):
    @extend_schema(
        operation_id="limits_retrieve",
        tags=LIMITS_TAG,
        summary="Get a limit with its current use",
        parameters=LIMIT_PARAMETERS,
        responses={200: LimitSerializer, **error_responses(404, *READ_ERRORS)},
    )
    def get(self, request: Request, scope: str, name: str) -> Response:
        return Response(represent_limit(queues.limit_usage(scope, name)))

    @extend_schema(
        operation_id="limits_set",
        tags=LIMITS_TAG,
        summary="Set the limit on a job type or a queue",
        description="Creates or replaces it: at most `max_running` of its jobs running at "
        "once, at most `max_starts` starts in any `period_seconds`, or both. From the next "
        "claim on, on every worker; jobs running over a lowered limit finish, and a longer "
        "period counts the starts already made within it.",
        parameters=LIMIT_PARAMETERS,
        request={"application/json": LIMIT_SET_SCHEMA},
        responses={200: LimitSerializer, **error_responses(400, 415, *WRITE_ERRORS)},
    )
    def put(self, request: Request, scope: str, name: str) -> Response:
        serializer = LimitSetSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        limit = queues.set_limit(scope, name, **serializer.validated_data)
        return Response(represent_limit(limit))

    @extend_schema(
        operation_id="limits_remove",
        tags=LIMITS_TAG,
        summary="Remove the limit on a job type or a queue",
        description="Removing a limit that does not exist changes nothing; a scope or name "
        "that no limit can have is refused.",
        parameters=LIMIT_PARAMETERS,
        responses={
            204: OpenApiResponse(description="Removed."),
            **error_responses(400, *WRITE_ERRORS),
        },
    )
    def delete(self, request: Request, scope: str, name: str) -> Response:
        queues.remove_limit(scope, name)
        return Response(status=status.HTTP_204_NO_CONTENT)


class HealthView(APIView):
    """Open to anyone, never throttled: load balancers and probes call it, and what one adds
    to the query (a cache-buster) is not refused."""

    authentication_classes: list[type] = []
    permission_classes = [AllowAny]
    throttle_classes: list[type] = []

    @extend_schema(
        operation_id="health",
        tags=["health"],
        summary="Are the database and Redis reachable, and the database migrated?",
        auth=[],
        responses={
            200: HealthSerializer,
            503: OpenApiResponse(
                description="Something is down, or the database lacks migrations of this "
                "code: the checks, plus the error envelope (`unavailable`) whose details name "
                "what is wrong; `Retry-After` is set."
            ),
        },
    )
    def get(self, request: Request) -> Response:
        database, problem = database_check()
        checks = {"database": database, "redis": redis_status()}
        problems = {"database": problem} if problem else {}
        if checks["redis"] != "ok":
            problems["redis"] = "Unreachable"
        if not problems:
            return Response(checks)
        message = unavailable_message(problems)
        details = {name: [checks[name]] for name in problems}
        return Response(
            {**checks, **error_body("unavailable", message, details)},
            status=status.HTTP_503_SERVICE_UNAVAILABLE,
            headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
        )


class ApiRootView(ApiView):
    """The browsable entry point: where every route of the API lives. Open to anyone, so it
    reads no token (a bad Authorization header is ignored); the session only shows who is
    signed in to the browsable API."""

    authentication_classes = [SessionAuthentication]
    permission_classes = [AllowAny]

    @extend_schema(exclude=True)
    def get(self, request: Request) -> Response:
        def url(name: str) -> str:
            return reverse(name, request=request)

        job_url = url("api-jobs") + "/{id}"
        return Response(
            {
                "jobs": url("api-jobs"),
                "stats": url("api-job-stats"),
                "dlq": url("api-job-dlq"),
                "empty_dlq": url("api-job-empty-dlq"),
                "job": job_url,
                "attempts": job_url + "/attempts",
                "cancel": job_url + "/cancel",
                "retry": job_url + "/retry",
                "purge": job_url + "/purge",
                "health": url("api-health"),
                "docs": url("api-docs"),
                "schema": url("openapi-schema"),
            }
        )
