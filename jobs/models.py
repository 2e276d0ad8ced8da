"""The data of the scheduler. Status changes happen only in `jobs.state`."""

import uuid

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.core.validators import RegexValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone

from .limits import MAX_ATTEMPTS
from .queue_names import INVALID_NAME, QUEUE_NAME_PATTERN, QueueSelection
from .registry import TYPE_NAME_MAX_LENGTH


class JobStatus(models.TextChoices):
    # Waiting to be claimed: due now, scheduled later, or blocked on a dependency.
    PENDING = "pending", "Pending"
    # Claimed by a worker; `current_attempt_id` is the fencing token of that claim.
    PROCESSING = "processing", "Processing"
    # The handler returned; `result` holds what it returned.
    COMPLETED = "completed", "Completed"
    # The last attempt failed: waiting for `next_retry_at`, or in the DLQ when `in_dlq`.
    FAILED = "failed", "Failed"
    # Stopped by an operator or by a cancelled upstream job; never runs again.
    CANCELLED = "cancelled", "Cancelled"


class RecurInterval(models.TextChoices):
    EVERY_1_MINUTE = "every_1_minute", "Every minute"
    EVERY_5_MINUTES = "every_5_minutes", "Every 5 minutes"
    EVERY_1_HOUR = "every_1_hour", "Every hour"


class Schedule(models.Model):
    """A cron schedule: which job to run, and when (a 5-field cron expression on the wall
    clock of an IANA time zone). Each run is a job row with `schedule` and its slot as
    `scheduled_at`, created once per slot; the completion of one creates the next
    (`jobs.recurrence.CronRecurrence`)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    type = models.CharField(max_length=TYPE_NAME_MAX_LENGTH)
    payload = models.JSONField(default=dict)
    priority = models.PositiveSmallIntegerField(default=2)
    max_retries = models.PositiveSmallIntegerField(default=3)
    cron = models.CharField(max_length=200)
    timezone = models.CharField(max_length=64, default="UTC")
    # The queue its runs wait in (`jobs.queues`).
    queue = models.CharField(max_length=100, default="default", db_default="default")
    # Paused: its waiting run was cancelled and no run is created until it is resumed.
    paused = models.BooleanField(default=False)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        db_table = "schedules"
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.type} at {self.cron} ({self.timezone})"


class Job(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    type = models.CharField(max_length=TYPE_NAME_MAX_LENGTH)
    # The queue it waits in (`jobs.queues`); a database default too, for raw inserts.
    queue = models.CharField(max_length=100, default="default", db_default="default")
    payload = models.JSONField(default=dict)
    priority = models.PositiveSmallIntegerField(default=2)
    status = models.CharField(max_length=16, choices=JobStatus.choices, default=JobStatus.PENDING)
    attempt_count = models.PositiveIntegerField(default=0)
    max_retries = models.PositiveSmallIntegerField(default=3)
    scheduled_at = models.DateTimeField()
    recur_interval = models.CharField(
        max_length=32, choices=RecurInterval.choices, null=True, blank=True
    )
    in_dlq = models.BooleanField(default=False)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    # When the worker running the job last said it still runs it (`lost_claims`): a job in
    # processing is stuck only once this, or its start, is SCHEDULER_STUCK_AFTER old, so a
    # handler whose timeout is longer is never taken back from a live worker. Not indexed,
    # so that the update can be HOT.
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    cancelled_at = models.DateTimeField(null=True, blank=True)
    next_retry_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(null=True, blank=True)
    # Set when the job enters the DLQ: its type, error class and message with numbers, ids
    # and quoted values masked (`scheduler_error_signature`), so that the DLQ groups alike
    # failures with an indexed GROUP BY.
    error_signature = models.TextField(null=True, blank=True)
    result = models.JSONField(null=True, blank=True)
    # No index of its own: reads by worker go through the partial `jobs_worker_idx`. No
    # constraint in the database either: a worker's row is written before its first claim
    # and deleted only once stopped past the retention with no job processing under it
    # (`prune_workers`), and checking it cost every claimed job a deferred lookup at commit.
    worker = models.ForeignKey(
        "Worker",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="jobs",
        db_index=False,
        db_constraint=False,
    )
    # When the job last became runnable (scheduled time, retry time, or dependency done).
    run_at = models.DateTimeField()
    # run_at + priority x 20 min: earliest-deadline-first is priority with aging on fixed keys.
    virtual_deadline = models.DateTimeField()
    # Upstream jobs not yet completed; the job is invisible to workers until this is 0.
    pending_dependencies = models.PositiveSmallIntegerField(default=0)
    # Fencing token: the attempt that holds the claim. Outcomes from other attempts are refused.
    current_attempt_id = models.UUIDField(null=True, blank=True)
    # The run before this one in a recurring series; unique so a slot is created once
    # (`jobs_previous_run_once`).
    previous_run = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="next_runs",
        db_index=False,
    )
    # The cron schedule this job is a run of; `scheduled_at` is its slot.
    schedule = models.ForeignKey(
        Schedule,
        null=True,
        blank=True,
        # A deleted schedule's runs stay (`jobs.state.delete_schedule`).
        on_delete=models.SET_NULL,
        related_name="runs",
        db_index=False,
    )
    upstream_jobs = models.ManyToManyField(
        "self",
        through="JobDependency",
        symmetrical=False,
        related_name="downstream_jobs",
        blank=True,
    )

    class Meta:
        db_table = "jobs"
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(priority__gte=1, priority__lte=3), name="jobs_priority_1_to_3"
            ),
            models.CheckConstraint(
                condition=Q(status__in=JobStatus.values), name="jobs_status_valid"
            ),
            models.CheckConstraint(
                condition=Q(max_retries__gte=1, max_retries__lte=MAX_ATTEMPTS),
                name="jobs_max_retries_1_to_10",
            ),
            models.CheckConstraint(
                condition=Q(in_dlq=False) | Q(status=JobStatus.FAILED), name="jobs_dlq_is_failed"
            ),
            models.CheckConstraint(
                condition=Q(recur_interval__isnull=True)
                | Q(recur_interval__in=RecurInterval.values),
                name="jobs_recur_interval_valid",
            ),
            # A run has one next run, however many completion reports race for it. Partial:
            # the jobs that are no next run (nearly all) have no entry to write when they
            # are created and at each change of state.
            models.UniqueConstraint(
                fields=["previous_run"],
                name="jobs_previous_run_once",
                condition=Q(previous_run__isnull=False),
            ),
            # A slot of a schedule has one run, however many completions race for it; a
            # run cancelled by a pause does not count, so a resume may create it again.
            models.UniqueConstraint(
                fields=["schedule", "scheduled_at"],
                name="jobs_schedule_slot_unique",
                condition=Q(schedule__isnull=False) & ~Q(status=JobStatus.CANCELLED),
            ),
        ]
        indexes = [
            # In claim order, so that the feeder reads its first entries and stops, whatever
            # the planner's statistics say; the claim looks its ids up by primary key
            # (ARCHITECTURE.md, "The claim's plan").
            models.Index(
                fields=["virtual_deadline", "created_at", "id"],
                name="jobs_claimable_idx",
                condition=Q(
                    status__in=[JobStatus.PENDING, JobStatus.FAILED],
                    in_dlq=False,
                    pending_dependencies=0,
                ),
            ),
            models.Index(
                fields=["started_at"],
                name="jobs_processing_idx",
                condition=Q(status=JobStatus.PROCESSING),
            ),
            models.Index(
                fields=["status", "in_dlq", "-created_at", "id"], name="jobs_status_created_idx"
            ),
            models.Index(fields=["-created_at", "id"], name="jobs_created_idx"),
            models.Index(fields=["type", "-created_at"], name="jobs_type_idx"),
            models.Index(fields=["queue", "-created_at"], name="jobs_queue_idx"),
            # Sort keys in their list order (`jobs.filters.SORT_ORDERS`), read either way;
            # each also serves its key's filter.
            models.Index(fields=["priority", "created_at", "id"], name="jobs_by_priority_idx"),
            models.Index(
                fields=["scheduled_at", "created_at", "id"], name="jobs_by_scheduled_at_idx"
            ),
            models.Index(fields=["updated_at"], name="jobs_updated_idx"),
            models.Index(
                fields=["completed_at"],
                name="jobs_completed_idx",
                condition=Q(completed_at__isnull=False),
            ),
            models.Index(
                fields=["cancelled_at"],
                name="jobs_cancelled_idx",
                condition=Q(cancelled_at__isnull=False),
            ),
            models.Index(
                fields=["next_retry_at"],
                name="jobs_next_retry_idx",
                condition=Q(next_retry_at__isnull=False),
            ),
            models.Index(
                fields=["started_at"],
                name="jobs_started_idx",
                condition=Q(started_at__isnull=False),
            ),
            models.Index(
                fields=["recur_interval"],
                name="jobs_recurring_idx",
                condition=Q(recur_interval__isnull=False),
            ),
            models.Index(fields=["-updated_at"], name="jobs_dlq_idx", condition=Q(in_dlq=True)),
            models.Index(
                fields=["error_signature", "-updated_at"],
                name="jobs_dlq_signature_idx",
                condition=Q(in_dlq=True),
            ),
            models.Index(
                fields=["worker"], name="jobs_worker_idx", condition=Q(status="processing")
            ),
        ]

    def __str__(self) -> str:
        return f"{self.type} {self.id}"

    @property
    def depends_on_id(self) -> uuid.UUID | None:
        """The API's single `depends_on`: the first upstream job, if any."""
        for dependency in self.dependencies.all():
            return dependency.depends_on_id
        return None


class DeadLetterJob(Job):
    """The dead-letter queue as its own admin page: jobs with `in_dlq`, no table of its own."""

    class Meta:
        proxy = True
        verbose_name = "dead-letter job"
        verbose_name_plural = "dead-letter queue"


class JobDependency(models.Model):
    """An edge of the dependency graph: `job` runs only after `depends_on` completed."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="dependencies")
    depends_on = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="dependents")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "job_dependencies"
        constraints = [
            models.UniqueConstraint(fields=["job", "depends_on"], name="job_dependency_unique"),
            models.CheckConstraint(
                condition=~Q(job=models.F("depends_on")), name="job_dependency_not_self"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.job_id} after {self.depends_on_id}"


class IdempotencyKey(models.Model):
    """A client's `Idempotency-Key`: the job created first under it, and a fingerprint of
    that request, so that a repeat gets the same job and a different request under the same
    key is refused. Live for `SCHEDULER_IDEMPOTENCY_WINDOW` seconds after `created_at`."""

    key = models.CharField(max_length=255, primary_key=True)
    # SHA-256 of the canonical request (`jobs.state`), hex.
    fingerprint = models.CharField(max_length=64)
    # Null inside the transaction that takes the key, and for a batch's key (`job_ids`). The
    # database's own foreign key (migration 0014) deletes a job's key with its job, also when
    # SQL deletes the job (purge, prune): a repeat after that creates a new job. The pruner
    # deletes every key past the window (`jobs.retention`).
    job = models.ForeignKey(
        Job, null=True, on_delete=models.CASCADE, related_name="+", db_constraint=False
    )
    # A batch's jobs in the order sent (POST /jobs/batch); a repeat gets those still there.
    job_ids = ArrayField(models.UUIDField(), null=True, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        db_table = "idempotency_keys"
        indexes = [models.Index(fields=["created_at"], name="idempotency_keys_created_idx")]

    def __str__(self) -> str:
        return self.key


class AttemptStatus(models.TextChoices):
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"


class JobAttempt(models.Model):
    # The id is the fencing token handed to the worker that made this attempt.
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # Indexed by `job_attempts_job_idx` (job_id, started_at).
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="attempts", db_index=False)
    attempt_number = models.PositiveIntegerField()
    status = models.CharField(
        max_length=16, choices=AttemptStatus.choices, default=AttemptStatus.RUNNING
    )
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    error_type = models.CharField(max_length=200, null=True, blank=True)
    error_message = models.TextField(null=True, blank=True)
    stack_trace = models.TextField(null=True, blank=True)
    # Not indexed: nothing reads attempts by worker. Not a database constraint, as `Job.worker`.
    worker = models.ForeignKey(
        "Worker",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="attempts",
        db_index=False,
        db_constraint=False,
    )

    class Meta:
        db_table = "job_attempts"
        ordering = ["job", "attempt_number", "started_at"]
        indexes = [
            models.Index(fields=["job", "started_at"], name="job_attempts_job_idx"),
            models.Index(
                fields=["-finished_at"],
                name="job_attempts_failed_idx",
                condition=Q(status="failed"),
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=AttemptStatus.values), name="job_attempts_status_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"attempt {self.attempt_number} of {self.job_id}"


class JobLog(models.Model):
    # Indexed by `job_logs_job_idx` (job_id, created_at).
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="logs", db_index=False)
    attempt = models.ForeignKey(
        JobAttempt, null=True, blank=True, on_delete=models.CASCADE, related_name="logs"
    )
    created_at = models.DateTimeField()
    level = models.CharField(max_length=10, default="INFO")
    message = models.TextField()

    class Meta:
        db_table = "job_logs"
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["job", "created_at"], name="job_logs_job_idx")]

    def __str__(self) -> str:
        return f"{self.level} {self.message[:40]}"


class LastPrune(models.Model):
    """What the pruner did last (`jobs.retention`), for the console: one row, written only by
    the pruner holding the prune turn."""

    ONLY = 1

    # When a pruner last looked for jobs past their retention.
    checked_at = models.DateTimeField()
    # The last pass that removed jobs: its first and last batch, and what it removed.
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    jobs = models.PositiveBigIntegerField(default=0)
    attempts = models.PositiveBigIntegerField(default=0)
    logs = models.PositiveBigIntegerField(default=0)

    class Meta:
        db_table = "job_last_prune"

    def __str__(self) -> str:
        return f"{self.jobs} jobs pruned by {self.finished_at}"


class Queue(models.Model):
    """What is decided about a queue (`jobs.queues`). A queue exists as soon as a job names
    it; a row is written the first time an operator pauses or resumes it."""

    name = models.CharField(
        max_length=100,
        primary_key=True,
        validators=[RegexValidator(QUEUE_NAME_PATTERN, INVALID_NAME)],
    )
    # Its jobs stay pending: the claim and the feeder pass over them (`jobs/sql/queries.sql`).
    paused = models.BooleanField(default=False)
    updated_at = models.DateTimeField()

    class Meta:
        db_table = "job_queues"
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} (paused)" if self.paused else self.name


class LimitScope(models.TextChoices):
    TYPE = "type", "Job type"
    QUEUE = "queue", "Queue"


class Limit(models.Model):
    """A limit that holds across all workers, on the jobs of one type or one queue: at most
    `max_running` running at once, at most `max_starts` starts in any `period_seconds`.
    Enforced by the claim (`scheduler_limit_room`, `jobs/sql/schema.sql`)."""

    scope = models.CharField(max_length=8, choices=LimitScope.choices)
    name = models.CharField(max_length=100)
    max_running = models.PositiveIntegerField(null=True, blank=True)
    max_starts = models.PositiveIntegerField(null=True, blank=True)
    period_seconds = models.PositiveIntegerField(null=True, blank=True)
    updated_at = models.DateTimeField()

    class Meta:
        db_table = "job_limits"
        ordering = ["scope", "name"]
        constraints = [
            models.UniqueConstraint(fields=["scope", "name"], name="job_limits_one_per_name"),
            models.CheckConstraint(
                condition=Q(scope__in=LimitScope.values), name="job_limits_scope_valid"
            ),
            models.CheckConstraint(
                condition=Q(max_running__isnull=False) | Q(max_starts__isnull=False),
                name="job_limits_limit_something",
            ),
            models.CheckConstraint(
                condition=Q(max_starts__isnull=True, period_seconds__isnull=True)
                | Q(max_starts__isnull=False, period_seconds__gte=1),
                name="job_limits_starts_have_a_period",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.scope} {self.name}"


class LimitStart(models.Model):
    """Starts counted against a rate limit: `n` jobs claimed at `started_at` (the claim's
    clock, taken under the limit's lock). Rows older than the period are deleted by the
    next claim under the same limit."""

    limit = models.ForeignKey(Limit, on_delete=models.CASCADE, db_index=False)
    started_at = models.DateTimeField()
    n = models.PositiveIntegerField()

    class Meta:
        db_table = "job_limit_starts"
        indexes = [models.Index(fields=["limit", "started_at"], name="job_limit_starts_idx")]

    def __str__(self) -> str:
        return f"{self.n} started at {self.started_at}"


class WorkerStatus(models.TextChoices):
    RUNNING = "running", "Running"
    # Got a shutdown signal: claims nothing new, finishing what it runs.
    STOPPING = "stopping", "Stopping"
    STOPPED = "stopped", "Stopped"
    # Missed heartbeats past SCHEDULER_WORKER_TIMEOUT; its jobs were rescued.
    DEAD = "dead", "Dead"


class Worker(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    hostname = models.CharField(max_length=255)
    pid = models.PositiveIntegerField()
    status = models.CharField(
        max_length=16, choices=WorkerStatus.choices, default=WorkerStatus.RUNNING
    )
    scheduler = models.CharField(max_length=16, default="heap")
    concurrency = models.PositiveSmallIntegerField(default=1)
    # The queues it serves (`runworker --queues`, `--queue NAME=N`): only `queues` (NULL: all)
    # except `other_queues` (those given slots of their own in a lane process).
    queues = ArrayField(models.CharField(max_length=100), null=True, blank=True)
    other_queues = ArrayField(
        models.CharField(max_length=100), default=list, db_default=[], blank=True
    )
    # The job types it met without a handler (its code is older or newer than theirs): it
    # leaves their jobs to other workers. Written with each heartbeat.
    unhandled_types = ArrayField(
        models.CharField(max_length=100), default=list, db_default=[], blank=True
    )
    started_at = models.DateTimeField()
    heartbeat_at = models.DateTimeField()
    stopped_at = models.DateTimeField(null=True, blank=True)
    jobs_done = models.PositiveBigIntegerField(default=0)

    class Meta:
        db_table = "workers"
        ordering = ["-started_at"]
        indexes = [
            models.Index(
                fields=["heartbeat_at"],
                name="workers_live_idx",
                condition=Q(status__in=["running", "stopping"]),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.hostname}:{self.pid}"

    @property
    def queue_selection(self) -> QueueSelection:
        return QueueSelection(
            tuple(self.queues) if self.queues is not None else None, tuple(self.other_queues)
        )


class ApiToken(models.Model):
    """A bearer token for the HTTP API. Only its SHA-256 is stored."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    key_hash = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=12)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "api_tokens"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"


class FailedTokenCount(models.Model):
    """Failed API token attempts from one client address in its current period
    (`jobs.api.throttling.FailedTokenAttempts`). In PostgreSQL rather than the cache so that
    the token's own statement reads it along: no second round trip per request. A row whose
    period has ended counts for nothing; the next failure anywhere deletes it."""

    address = models.TextField(primary_key=True)
    failures = models.PositiveIntegerField()
    period_ends = models.DateTimeField(db_index=True)

    class Meta:
        db_table = "api_token_failures"

    def __str__(self) -> str:
        return f"{self.address}: {self.failures} until {self.period_ends:%H:%M:%S}"


class Theme(models.TextChoices):
    SYSTEM = "system", "Follow the system"
    LIGHT = "light", "Light"
    DARK = "dark", "Dark"


class UserPreference(models.Model):
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="console_preference"
    )
    time_zone = models.CharField(max_length=64, default="UTC")
    page_size = models.PositiveSmallIntegerField(default=20)
    theme = models.CharField(max_length=8, choices=Theme.choices, default=Theme.SYSTEM)

    class Meta:
        db_table = "user_preferences"

    def __str__(self) -> str:
        return f"preferences of {self.user}"


class Webhook(models.Model):
    """A notification endpoint; each delivery is an `http_request` job."""

    # What a request can be sent to is `jobs.webhooks.validate`'s rule (`outbound.sendable_url`),
    # not Django's URLValidator, which refuses a host without a dot.
    url = models.CharField(max_length=500)
    event_types = models.JSONField(default=list)
    secret = models.CharField(max_length=200)
    is_active = models.BooleanField(default=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "webhooks"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.url


class AuditSource(models.TextChoices):
    API = "api", "API"
    CONSOLE = "console", "Console"
    ADMIN = "admin", "Admin"


class AuditEntry(models.Model):
    """One operator action (`jobs.audit`): who, when, from where, what, before and after.

    Written in the transaction of the action it records; never updated (a trigger of
    `schema.sql` refuses it) and deleted only by the pruner past `SCHEDULER_RETAIN_AUDIT`.
    """

    at = models.DateTimeField(default=timezone.now)
    # The name is kept as it was: the user may be renamed or deleted later.
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, db_index=False
    )
    username = models.CharField(max_length=150)
    source = models.CharField(max_length=16, choices=AuditSource.choices)
    address = models.CharField(max_length=64, blank=True, default="")
    action = models.CharField(max_length=32)
    # What it was done to: a job id, a webhook, or how many jobs.
    target = models.CharField(max_length=200, blank=True, default="")
    count = models.PositiveBigIntegerField(default=1)
    summary = models.TextField(blank=True, default="")
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)

    class Meta:
        db_table = "audit_log"
        ordering = ["-at", "-id"]
        verbose_name = "audit entry"
        verbose_name_plural = "audit log"
        indexes = [
            models.Index(fields=["-at", "-id"], name="audit_log_at_idx"),
            models.Index(fields=["target", "-at"], name="audit_log_target_idx"),
            # The admin's and the console's filters by action and by source: a rare one
            # (`queue_pause`, `token_revoke`) walked the log from its newest entry on.
            models.Index(fields=["action", "-id"], name="audit_log_action_idx"),
            models.Index(fields=["source", "-id"], name="audit_log_source_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.username} {self.action} {self.target}"
