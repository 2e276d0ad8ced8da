"""The job routes of api.md. Each view parses, calls `jobs.state` or a selector, renders.

Domain errors (`JobValidationError`, `JobNotFound`, `InvalidStateError`) are not caught
here: `jobs.api.errors.exception_handler` turns them into the envelope.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.http import HttpResponse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from prometheus_client.exposition import choose_encoder
from rest_framework import status
from rest_framework.authentication import SessionAuthentication
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.views import APIView

from jobs import metrics, state
from jobs.explain import explain
from jobs.representation import represent_job
from jobs.selectors import job_attempts, job_list
from jobs.state import JobObject
from jobs.stats import current_stats

from .auth import BearerTokenAuthentication
from .errors import RETRY_AFTER_SECONDS, PayloadTooLarge, error_body
from .pagination import paginate
from .parsers import JSONBodyParser
from .probes import database_status, redis_status
from .schema import (
    JOB_ID_PARAMETER,
    READ_ERRORS,
    WRITE_ERRORS,
    error_responses,
    list_parameters,
)
from .serializers import (
    AttemptSerializer,
    ExplanationSerializer,
    HealthSerializer,
    JobBatchCreateSerializer,
    JobBatchSerializer,
    JobCreateSerializer,
    JobPageSerializer,
    JobSerializer,
    PurgedSerializer,
    StatsSerializer,
    flat_errors,
)

JOBS_TAG = ["jobs"]


def parse_job_id(raw: str) -> uuid.UUID:
    try:
        return uuid.UUID(raw)
    except ValueError:
        raise state.JobValidationError({"id": [f"{raw!r} is not a valid UUID."]}) from None


class ApiView(APIView):
    """Bearer tokens for clients, the session for the console and the browsable API (whose
    writes then need the CSRF token). Refuses a declared oversized body before
    authentication or parsing spend anything."""

    authentication_classes = [BearerTokenAuthentication, SessionAuthentication]
    parser_classes = [JSONBodyParser]

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        declared = request.META.get("CONTENT_LENGTH") or "0"
        if declared.isdigit() and int(declared) > settings.API_MAX_BODY_BYTES:
            raise PayloadTooLarge(settings.API_MAX_BODY_BYTES)
        super().initial(request, *args, **kwargs)


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
        responses={201: JobSerializer, **error_responses(400, 415, *WRITE_ERRORS)},
    )
    def post(self, request: Request) -> Response:
        serializer = JobCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        job = state.enqueue(**serializer.validated_data)
        location = reverse("api-job-detail", kwargs={"job_id": job["id"]}, request=request)
        return Response(job, status=status.HTTP_201_CREATED, headers={"Location": location})


class JobBatchView(ApiView):
    @extend_schema(
        operation_id="jobs_create_batch",
        tags=JOBS_TAG,
        summary="Submit up to 1,000 jobs at once",
        description="All or none: every job is checked before any is created. Each job is "
        "what `POST /jobs` takes, except `depends_on` (submit a dependent job on its own). "
        "Errors name the job by its index: `jobs.3.priority`. The body limit "
        "(`API_MAX_BODY_BYTES`) applies to the whole batch.",
        request=JobBatchCreateSerializer,
        responses={201: JobBatchSerializer, **error_responses(400, 413, 415, *WRITE_ERRORS)},
    )
    def post(self, request: Request) -> Response:
        serializer = JobBatchCreateSerializer(data=request.data)
        if not serializer.is_valid():
            raise ValidationError(flat_errors(serializer.errors))
        specs = [state.JobSpec(**job) for job in serializer.validated_data["jobs"]]
        try:
            jobs = state.enqueue_many(specs)
        except state.JobValidationError as error:
            raise state.JobValidationError(
                {f"jobs.{key}": messages for key, messages in error.details.items()}
            ) from None
        return Response({"jobs": jobs}, status=status.HTTP_201_CREATED)


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
        "for upstream jobs, scheduled for later, waiting for its retry, no live worker, "
        "or due with N jobs ahead of it in run order.",
        parameters=[JOB_ID_PARAMETER],
        responses={200: ExplanationSerializer, **error_responses(400, 404, *READ_ERRORS)},
    )
    def get(self, request: Request, job_id: str) -> Response:
        return Response(explain(parse_job_id(job_id)))


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
    return extend_schema(
        operation_id=f"jobs_{action}",
        tags=JOBS_TAG,
        summary=summary,
        description=description,
        parameters=[JOB_ID_PARAMETER],
        request=None,
        responses={**done, **error_responses(400, 404, 409, *WRITE_ERRORS)},
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
        "Back to pending with attempt_count 0, due now; its attempts are kept.",
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


class HealthView(APIView):
    """Open to anyone, never throttled: load balancers and probes call it."""

    authentication_classes: list[type] = []
    permission_classes = [AllowAny]
    throttle_classes: list[type] = []

    @extend_schema(
        operation_id="health",
        tags=["health"],
        summary="Are the database and Redis reachable?",
        auth=[],
        responses={
            200: HealthSerializer,
            503: OpenApiResponse(
                description="Something is down: the checks, plus the error envelope "
                "(`unavailable`) whose details name what is down; `Retry-After` is set."
            ),
        },
    )
    def get(self, request: Request) -> Response:
        checks = {"database": database_status(), "redis": redis_status()}
        down = {name: [outcome] for name, outcome in checks.items() if outcome != "ok"}
        if not down:
            return Response(checks)
        message = f"Unreachable: {', '.join(down)}."
        return Response(
            {**checks, **error_body("unavailable", message, down)},
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
