"""Request parsing and the shapes of the OpenAPI schema.

`JobCreateSerializer` refuses unknown fields and reads what JSON cannot say itself (an
instant, a job id); every other field is taken as sent (`AsSent`) and judged by the domain,
`jobs.state.enqueue`, in the words it gives Python callers: registered type, payload schema,
priority range, future `scheduled_at`, existing `depends_on`. The read-only serializers below
describe the objects that `jobs.representation` and `jobs.stats` build, for the schema only.
"""

from __future__ import annotations

import copy
import uuid
from datetime import datetime
from typing import Any, cast

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.settings import api_settings

from jobs import display, limits, queue_names
from jobs.explain import REASONS
from jobs.filters import InstantError, parse_instant
from jobs.models import AttemptStatus, JobStatus, LimitScope, RecurInterval
from jobs.queues import MAX_LIMIT, MAX_PERIOD_SECONDS
from jobs.registry import registry

from .errors import ERROR_CODES

INSTANT_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {
            "type": "integer",
            "minimum": 0,
            "maximum": limits.MAX_MILLISECONDS,
            "description": "Unix milliseconds",
        },
        {
            "type": "string",
            "format": "date-time",
            "pattern": f"^{limits.WRITTEN_YEAR_PATTERN}-",
            "description": f"ISO 8601, written with a year from {limits.EARLIEST_YEAR} to "
            f"{limits.LATEST_YEAR}",
        },
    ]
}


@extend_schema_field(INSTANT_SCHEMA)
class InstantField(serializers.Field):
    def to_internal_value(self, data: Any) -> datetime:
        try:
            return parse_instant(data)
        except InstantError as error:
            raise serializers.ValidationError(str(error), code="invalid") from None


class AsSent(serializers.Field):
    """A body field taken as the JSON value sent, for the domain (`jobs.state`, `jobs.queues`)
    to judge as it judges the same argument from Python: one rule, in one set of words. DRF's
    own fields coerced (`"3"`, `" 4 "` and `"٣"` were integers, `5` the queue "5", `" UTC "`
    UTC, all of which `enqueue` refuses) and refused in words of their own."""

    def to_internal_value(self, data: Any) -> Any:
        return data

    def to_representation(self, value: Any) -> Any:
        return value


@extend_schema_field(OpenApiTypes.STR)
class TextAsSent(AsSent):
    pass


@extend_schema_field(OpenApiTypes.INT)
class IntegerAsSent(AsSent):
    """A number with no fraction is the integer it equals: JSON Schema counts `2.0` as an
    integer (and `parse_instant` reads milliseconds so). Anything else goes on as sent."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, float) and data.is_integer():
            return int(data)
        return data


@extend_schema_field(OpenApiTypes.OBJECT)
class PayloadField(serializers.JSONField):
    """Any JSON here; that it is an object fitting the handler's schema is a domain rule."""


@extend_schema_field(
    {
        "anyOf": [
            {"type": "string", "format": "uuid"},
            {"type": "array", "items": {"type": "string", "format": "uuid"}, "minItems": 1},
        ]
    }
)
class DependsOnField(serializers.Field):
    """One job id (as before fan-in), or a list of them."""

    def to_internal_value(self, data: Any) -> uuid.UUID | list[uuid.UUID]:
        if isinstance(data, list):
            return [self._job_id(item) for item in data]
        return self._job_id(data)

    @staticmethod
    def _job_id(data: Any) -> uuid.UUID:
        one = serializers.UUIDField()
        # UUIDField reads an integer (a boolean too) as the UUID of that number: `5` was
        # looked up as job 00000000-0000-0000-0000-000000000005, and refused as missing.
        if not isinstance(data, str):
            one.fail("invalid")
        return one.to_internal_value(data)


class RefusesUnknownFields(serializers.Serializer):
    """A body field this serializer does not know is a validation error, not ignored; one
    of `not_taken` (a field the API has, but not here) is refused in its own words. Named
    with the errors of the fields it knows, which an unknown one used to hide."""

    not_taken: dict[str, str] = {}

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, dict):
            return super().to_internal_value(data)
        allowed = f"Unknown field. Allowed: {', '.join(self.fields)}."
        unknown = {
            name: [self.not_taken.get(name, allowed)]
            for name in sorted(set(data) - set(self.fields))
        }
        try:
            value = super().to_internal_value(data)
        except serializers.ValidationError as error:
            # A serializer's field errors, by field name.
            known = cast("dict[str, Any]", error.detail)
            raise serializers.ValidationError({**unknown, **known}) from None
        if unknown:
            raise serializers.ValidationError(unknown)
        return value


class JobCreateSerializer(RefusesUnknownFields):
    def get_fields(self) -> dict[str, serializers.Field]:
        # Shallow copies of the declared fields, where DRF deep-copies them (re-running each
        # field's __init__: 0.3 ms of every POST /jobs). bind() gives each copy its own name
        # and parent; what the copies share (validators, choices, error messages) is only
        # read. Safe because every field here is a leaf: none holds a child or a serializer.
        return {name: copy.copy(field) for name, field in self._declared_fields.items()}

    # Required, but null goes to the domain too: it refuses None from Python in its own words.
    type = TextAsSent(allow_null=True, help_text="A registered job type.")
    payload = PayloadField(
        allow_null=True, help_text="Validated by the handler's own payload schema."
    )
    priority = IntegerAsSent(allow_null=True, help_text="1 = high, 2 = normal, 3 = low.")
    scheduled_at = InstantField(
        required=False, allow_null=True, help_text="In the future; absent means due now."
    )
    recur_interval = TextAsSent(
        required=False, allow_null=True, help_text=f"One of {', '.join(RecurInterval.values)}."
    )
    depends_on = DependsOnField(
        required=False,
        allow_null=True,
        help_text="An existing job, or a list of them; this one waits until every one of "
        "them is completed.",
    )
    max_retries = IntegerAsSent(
        required=False, allow_null=True, help_text=f"1..{limits.MAX_ATTEMPTS}."
    )
    cron = TextAsSent(
        required=False,
        allow_null=True,
        help_text="A 5-field cron expression: creates a schedule, and this is its first run.",
    )
    timezone = TextAsSent(
        required=False,
        allow_null=True,
        help_text="With `cron`: the IANA time zone its slots are read in (default UTC).",
    )
    queue = TextAsSent(
        required=False,
        allow_null=True,
        help_text="The queue the job waits in; absent or null means the one its type names, "
        f"else `{queue_names.DEFAULT_QUEUE}`. {queue_names.NAME_RULE}",
    )

    def validate_type(self, value: Any) -> Any:
        # An internal type is as unknown to a client as an unregistered one; the domain
        # (`jobs.state`) reports those, and whatever is no type's name.
        if isinstance(value, str) and value in registry and registry.get(value).internal:
            raise serializers.ValidationError(registry.unknown_type_message(value))
        return value


# The most jobs one POST /jobs/batch creates.
MAX_BATCH = 1000


class JobBatchItemSerializer(JobCreateSerializer):
    """A job of POST /jobs/batch: what POST /jobs takes, but a dependent job comes alone."""

    depends_on = None  # type: ignore[assignment]  # DRF's way to leave out a parent's field
    cron = None  # type: ignore[assignment]  # a schedule comes alone too
    timezone = None  # type: ignore[assignment]

    # Sent anyway (null too: the body has no such field), each is refused naming the route
    # that takes it; "Unknown field" read as if the API had none.
    not_taken = {
        "depends_on": "depends_on is not taken in a batch: create the job with POST /api/v1/jobs.",
        **{
            name: f"{name} is not taken in a batch: create the schedule with POST /api/v1/jobs."
            for name in ("cron", "timezone")
        },
    }


class JobBatchCreateSerializer(RefusesUnknownFields):
    """Jobs created all or none: every one is validated before any is written."""

    jobs = JobBatchItemSerializer(  # type: ignore[call-arg]  # ListSerializer's arguments
        many=True,
        allow_empty=False,
        max_length=MAX_BATCH,
        help_text=f"1 to {MAX_BATCH} jobs, each as POST /jobs takes it but `depends_on`.",
    )


def flat_errors(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    """DRF's nested errors (a list per item of a list) as the API's field -> messages, the
    path of each field written with dots: `jobs.3.priority`; what is wrong with a nested
    value as a whole (`jobs`, `jobs.3`) under its own path."""
    if isinstance(detail, dict):
        items: Any = detail.items()
    elif detail and all(isinstance(item, dict) for item in detail):
        items = enumerate(detail)
    else:
        return {prefix: [str(message) for message in detail]}
    flat: dict[str, list[str]] = {}
    for key, value in items:
        if not prefix:
            path = str(key)
        elif key == api_settings.NON_FIELD_ERRORS_KEY:
            path = prefix
        else:
            path = f"{prefix}.{key}"
        flat.update(flat_errors(value, path))
    return flat


class JobSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    type = serializers.CharField()
    payload = PayloadField()
    priority = serializers.IntegerField(min_value=1, max_value=3)
    status = serializers.ChoiceField(choices=JobStatus.choices)
    attempt_count = serializers.IntegerField()
    max_retries = serializers.IntegerField()
    scheduled_at = serializers.DateTimeField()
    recur_interval = serializers.ChoiceField(choices=RecurInterval.choices, allow_null=True)
    depends_on = serializers.UUIDField(allow_null=True)
    in_dlq = serializers.BooleanField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    completed_at = serializers.DateTimeField(allow_null=True)
    cancelled_at = serializers.DateTimeField(allow_null=True)
    next_retry_at = serializers.DateTimeField(allow_null=True)
    last_error = serializers.CharField(allow_null=True)
    result = serializers.JSONField(
        help_text="What the handler returned (any JSON); null until then."
    )
    worker_id = serializers.UUIDField(allow_null=True)
    schedule_id = serializers.UUIDField(
        allow_null=True, help_text="The cron schedule this job is a run of."
    )
    upstream_ids = serializers.ListField(
        child=serializers.UUIDField(),
        help_text="Every job this one waits for, in the order given (`depends_on` is the first).",
    )
    queue = serializers.CharField()


class JobBatchSerializer(serializers.Serializer):
    jobs = JobSerializer(many=True, help_text="The jobs created, in the order submitted.")


class JobPageSerializer(serializers.Serializer):
    count = serializers.IntegerField(
        help_text="Jobs matching: exact up to 10,000, PostgreSQL's estimate above (see "
        "count_exact)."
    )
    count_exact = serializers.BooleanField(
        help_text="Whether count is exact: an exact count of more jobs would read them all."
    )
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = JobSerializer(many=True)


class ScheduleSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    type = serializers.CharField()
    payload = PayloadField()
    priority = serializers.IntegerField(min_value=1, max_value=3)
    max_retries = serializers.IntegerField()
    cron = serializers.CharField()
    timezone = serializers.CharField(help_text="IANA name.")
    paused = serializers.BooleanField()
    next_runs = serializers.ListField(
        child=serializers.DateTimeField(),
        help_text="The next 5 slots; none while paused, or while its last run is in the "
        "dead-letter queue (or was purged from it): the series goes on once that run is "
        "retried, or the schedule resumed.",
    )
    current_run_id = serializers.UUIDField(
        allow_null=True, help_text="Its run waiting or running, if any."
    )
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class SchedulePageSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = ScheduleSerializer(many=True)


class GraphNodeSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    type = serializers.CharField()
    status = serializers.ChoiceField(choices=JobStatus.choices)
    in_dlq = serializers.BooleanField()
    display_state = serializers.CharField(
        help_text=f"As the console shows it: {', '.join(display.STATES)}."
    )
    waiting_on_dlq = serializers.BooleanField(
        help_text="Blocked by a job in the dead-letter queue, directly or through the "
        "blocked jobs between."
    )
    level = serializers.IntegerField(help_text="Negative upstream, positive downstream.")


class GraphEdgeSerializer(serializers.Serializer):
    upstream = serializers.UUIDField()
    downstream = serializers.UUIDField(help_text="Waits for `upstream` to complete.")


class JobGraphSerializer(serializers.Serializer):
    job_id = serializers.UUIDField()
    depth = serializers.IntegerField()
    truncated = serializers.BooleanField()
    nodes = GraphNodeSerializer(many=True)
    edges = GraphEdgeSerializer(many=True)


class AttemptSerializer(serializers.Serializer):
    attempt_number = serializers.IntegerField()
    status = serializers.ChoiceField(choices=AttemptStatus.choices)
    started_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    duration_ms = serializers.IntegerField(allow_null=True)
    error_type = serializers.CharField(allow_null=True)
    error_message = serializers.CharField(allow_null=True)
    stack_trace = serializers.CharField(allow_null=True)
    worker_id = serializers.UUIDField(allow_null=True)


class StatsSerializer(serializers.Serializer):
    pending = serializers.IntegerField()
    processing = serializers.IntegerField()
    completed = serializers.IntegerField()
    failed = serializers.IntegerField(help_text="Only jobs waiting for a retry.")
    dlq = serializers.IntegerField(help_text="Jobs in the dead-letter queue.")
    cancelled = serializers.IntegerField()
    total = serializers.IntegerField()


class ExplanationSerializer(serializers.Serializer):
    reason = serializers.ChoiceField(choices=list(REASONS))
    message = serializers.CharField(help_text="The reason in one plain sentence.")
    details = serializers.DictField(
        help_text="The data behind it: `run_at`; `next_retry_at`, `attempt`, `max_retries`; "
        "`upstream` (id, type, status, `display_state` each), `dead_letters` (id, type each: "
        "the dead letters that hold it up, directly or through the blocked jobs between), "
        "`dead_letters_truncated` (the walk stopped at 1,000 unfinished upstream jobs: there "
        "may be more); `queue`, `paused_since`, `paused_by` (null when "
        "no operator's pause is recorded), `pending_in_queue`; `queue`, `live_workers`, "
        "`served_by_live_workers`; `scope`, `name`, `full` (`max_running` or `max_starts`), "
        "`max_running`, `running`, `max_starts`, `recent_starts`, `period_seconds`; `ahead` "
        "(counted up to 10,001), `virtual_deadline`, `newer_jobs_queue_behind_from` "
        "(priority -> time), `live_workers` (serving its queue)."
    )


class QueueSerializer(serializers.Serializer):
    name = serializers.CharField()
    paused = serializers.BooleanField(help_text="Its jobs stay pending until it is resumed.")
    changed_at = serializers.DateTimeField(
        allow_null=True, help_text="When it was last paused or resumed; null: never."
    )
    pending = serializers.IntegerField(help_text="Due or scheduled, not waiting on upstream.")
    blocked = serializers.IntegerField(help_text="Waiting for upstream jobs.")
    processing = serializers.IntegerField()
    retrying = serializers.IntegerField(help_text="Failed, waiting for a retry.")
    dlq = serializers.IntegerField(help_text="In the dead-letter queue.")


class LimitSetSerializer(RefusesUnknownFields):
    """Numbers judged by `jobs.queues.set_limit`, as from Python."""

    max_running = IntegerAsSent(required=False, help_text="At most this many running at once.")
    max_starts = IntegerAsSent(
        required=False, help_text="At most this many starts in any `period_seconds`."
    )
    period_seconds = IntegerAsSent(required=False, help_text="With `max_starts`.")


def _limit_fields(*names: str) -> dict[str, Any]:
    bounds = {
        "max_running": MAX_LIMIT,
        "max_starts": MAX_LIMIT,
        "period_seconds": MAX_PERIOD_SECONDS,
    }
    return {
        "type": "object",
        "additionalProperties": False,
        "required": list(names),
        "properties": {
            name: {"type": "integer", "minimum": 1, "maximum": bounds[name]} for name in names
        },
    }


# The body of PUT /limits/{scope}/{name} as the rules are: a number running, a number of
# starts per period, or both; `max_starts` and `period_seconds` go together.
LIMIT_SET_SCHEMA: dict[str, Any] = {
    "anyOf": [
        _limit_fields("max_running"),
        _limit_fields("max_starts", "period_seconds"),
        _limit_fields("max_running", "max_starts", "period_seconds"),
    ]
}


class LimitSerializer(serializers.Serializer):
    scope = serializers.ChoiceField(choices=LimitScope.choices)
    name = serializers.CharField(help_text="The job type or queue limited.")
    max_running = serializers.IntegerField(allow_null=True)
    max_starts = serializers.IntegerField(allow_null=True)
    period_seconds = serializers.IntegerField(allow_null=True)
    running = serializers.IntegerField(help_text="Its jobs running now.")
    recent_starts = serializers.IntegerField(help_text="Its starts in the last period_seconds.")
    updated_at = serializers.DateTimeField()


class PurgedSerializer(serializers.Serializer):
    purged = serializers.IntegerField()


class HealthSerializer(serializers.Serializer):
    database = serializers.CharField(
        help_text="`ok`, why it is unreachable, or which migrations of this code its schema lacks."
    )
    redis = serializers.CharField(help_text="`ok`, or why it is unreachable.")


class ErrorDetailSerializer(serializers.Serializer):
    code = serializers.ChoiceField(choices=ERROR_CODES)
    message = serializers.CharField()
    details = serializers.DictField(
        help_text="Field name -> messages for validation_error; {status} for invalid_state."
    )


class ErrorSerializer(serializers.Serializer):
    error = ErrorDetailSerializer()
