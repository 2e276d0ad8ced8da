"""What the console pages read. Writes go through `jobs.state`; nothing here changes a job."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Literal
from urllib.parse import unquote_plus, urlsplit

from django.conf import settings
from django.db.models import (
    BooleanField,
    Count,
    ExpressionWrapper,
    F,
    Max,
    Min,
    Q,
    QuerySet,
    TextField,
    Window,
)
from django.db.models.functions import Cast, RowNumber
from django.utils import timezone

from jobs import bulk, stats
from jobs.display import STATES, job_display_state, reveal_bidi, with_queue_paused
from jobs.models import (
    Job,
    JobDependency,
    JobLog,
    JobStatus,
    LastPrune,
    Worker,
    WorkerStatus,
)
from jobs.retention import Retention, last_prune
from jobs.stats import current_stats

# Stat cards in display order: (key in the stats object, card label, the display state whose
# colour they take). A card counts jobs; its label says so where the state's pill label is terse.
STAT_CARDS = (
    ("pending", "Pending", STATES["pending"]),
    ("processing", "Processing", STATES["processing"]),
    ("completed", "Completed", STATES["completed"]),
    ("failed", "Retrying", STATES["retrying"]),
    ("dlq", "Dead letters", STATES["dlq"]),
    ("cancelled", "Cancelled", STATES["cancelled"]),
)


@dataclass(frozen=True)
class StatCard:
    key: str
    label: str
    state: str
    value: int


def stat_cards(stats: dict[str, int] | None = None) -> list[StatCard]:
    stats = stats if stats is not None else current_stats()
    return [StatCard(key, label, shown.name, stats.get(key, 0)) for key, label, shown in STAT_CARDS]


def active_jobs(limit: int = 12) -> list[Job]:
    """Running jobs first (oldest claim first), then jobs waiting for their next attempt."""
    running = list(
        Job.objects.filter(status=JobStatus.PROCESSING)
        .select_related("worker")
        .order_by("started_at")[:limit]
    )
    waiting = list(
        Job.objects.filter(status=JobStatus.FAILED, in_dlq=False).order_by("next_retry_at")[
            : max(0, limit - len(running))
        ]
    )
    return running + waiting


@dataclass(frozen=True)
class DlqInsight:
    count: int
    newest: list[Job]
    top_types: list[tuple[str, int]]


def dlq_insight(newest: int = 5, top: int = 5) -> DlqInsight:
    dlq = Job.objects.filter(in_dlq=True)
    return DlqInsight(
        count=current_stats()["dlq"],
        newest=list(dlq.order_by("-updated_at")[:newest]),
        top_types=failures_by_type(top),
    )


@dataclass(frozen=True)
class RetentionStatus:
    completed: str
    dlq: str
    every: str
    last: LastPrune | None


def retention_status() -> RetentionStatus:
    """The retention settings in words, and what the pruner did last."""
    kept = Retention.from_settings()
    return RetentionStatus(
        completed=_for(kept.completed) if kept.completed else "forever",
        dlq=_for(kept.dlq) if kept.dlq else "until retried or purged",
        every=_duration(timedelta(seconds=settings.SCHEDULER_PRUNE_INTERVAL)),
        last=last_prune(),
    )


def audit_retention() -> str:
    seconds = settings.SCHEDULER_RETAIN_AUDIT
    return f"for {_duration(timedelta(seconds=seconds))}" if seconds > 0 else "forever"


def _for(kept: timedelta) -> str:
    return f"for {_duration(kept)} after they finished"


_WEEK = ("week", 604_800)
_UNITS = (("day", 86_400), ("hour", 3_600), ("minute", 60), ("second", 1))


def _duration(span: timedelta) -> str:
    """A configured span as set, in exact units: 90 days is "90 days", 7 "1 week" (Django's
    `timesince`, which counts calendar months back from today, said "2 months, 4 weeks").
    Weeks only for a whole number of them: "12 weeks, 6 days" reads worse than "90 days"."""
    left = round(span.total_seconds())
    units = _UNITS if left % _WEEK[1] else (_WEEK, *_UNITS)
    parts = []
    for unit, size in units:
        count, left = divmod(left, size)
        if count:
            parts.append(f"{count:,}\xa0{unit}{'' if count == 1 else 's'}")
    return ", ".join(parts) or "0\xa0seconds"


@dataclass(frozen=True)
class NodeHealth:
    worker: Worker
    stale: bool
    # The oldest CURRENT_JOBS_SHOWN of the jobs it holds in processing, and how many more.
    current_jobs: list[Job]
    more_jobs: int


@dataclass(frozen=True)
class NodeHealthPanel:
    workers: list[NodeHealth]
    # The panel is also read again on this timer, in ms (console.js, `data-read-every`): a
    # heartbeat is no job event, nor is its stopping, and with every worker killed no event
    # comes at all. Once a heartbeat, so that the column moves as workers beat, and three
    # times within the stale threshold, so that a quiet worker is flagged at most a third of
    # it late; never more often than NODE_HEALTH_READ_FLOOR_MS.
    read_every_ms: int


NODE_HEALTH_READ_FLOOR_MS = 2000
CURRENT_JOBS_SHOWN = 5


def node_health(limit: int = 12) -> NodeHealthPanel:
    """Live workers, then the most recently stopped ones, stale heartbeats flagged; and how
    often the panel is read again."""
    now = timezone.now()
    stale_before = now - timedelta(seconds=settings.CONSOLE_STALE_WORKER_SECONDS)
    live = [WorkerStatus.RUNNING, WorkerStatus.STOPPING]
    workers = list(Worker.objects.filter(status__in=live).order_by("-started_at")[:limit])
    if len(workers) < limit:
        workers += list(
            Worker.objects.exclude(status__in=live)
            .filter(heartbeat_at__gte=now - timedelta(hours=1))
            .order_by("-heartbeat_at")[: limit - len(workers)]
        )
    # A worker's current jobs are derived: those it holds in processing. With its prefetch it
    # may hold thousands; this panel is refetched every few hundred milliseconds, so it
    # reads the oldest few of each and counts the rest.
    held = Job.objects.filter(status=JobStatus.PROCESSING, worker_id__in=[w.id for w in workers])
    counts = dict(held.values_list("worker_id").annotate(n=Count("id")).order_by())
    current: dict[uuid.UUID, list[Job]] = {}
    for job in (
        held.only("id", "type", "worker_id", "started_at")
        .annotate(
            place=Window(RowNumber(), partition_by=F("worker_id"), order_by=["started_at", "id"])
        )
        .filter(place__lte=CURRENT_JOBS_SHOWN)
        .order_by("started_at", "id")
    ):
        assert job.worker_id is not None  # noqa: S101 - filtered on it
        current.setdefault(job.worker_id, []).append(job)
    every = min(settings.SCHEDULER_HEARTBEAT_INTERVAL, settings.CONSOLE_STALE_WORKER_SECONDS / 3)
    return NodeHealthPanel(
        workers=[
            NodeHealth(
                worker=w,
                stale=w.status in live and w.heartbeat_at < stale_before,
                current_jobs=current.get(w.id, []),
                more_jobs=counts.get(w.id, 0) - len(current.get(w.id, [])),
            )
            for w in workers
        ],
        read_every_ms=max(NODE_HEALTH_READ_FLOOR_MS, round(every * 1000)),
    )


@dataclass(frozen=True)
class FeedLine:
    at: datetime
    event: str
    state: str
    job: Job


def log_feed(limit: int = 25) -> list[FeedLine]:
    """The recent history the live feed starts from: each recently changed job, as the event
    its current state came from. New lines arrive from the event stream."""
    jobs = Job.objects.order_by("-updated_at")[:limit]
    lines = []
    for job in jobs:
        shown = job_display_state(job)
        lines.append(FeedLine(job.updated_at, shown.event, shown.name, job))
    return lines


# --- the dead-letter queue -------------------------------------------------------------------


def dlq_jobs() -> QuerySet[Job]:
    return Job.objects.filter(in_dlq=True).order_by("-updated_at")


def failures_by_type(limit: int = 8) -> list[tuple[str, int]]:
    return stats.dlq_largest("type", limit)


def failures_by_error(limit: int = 8) -> list[tuple[str, int]]:
    return [
        ((error or "(no message)").splitlines()[0], n)
        for error, n in stats.dlq_largest("error", limit)
    ]


@dataclass(frozen=True)
class DlqGroup:
    """Dead letters alike: one error signature (None for those that died without one)."""

    signature: str | None
    count: int
    first_seen: datetime
    last_seen: datetime
    per_day: list[int]


def dlq_groups(tz: tzinfo, limit: int = 10, days: int = stats.DLQ_DAYS) -> list[DlqGroup]:
    """The largest groups of the DLQ by error signature, each with its dead letters per day
    over the last `days` days (in the viewer's time zone): the counts from the DLQ's group
    counters (`jobs.stats`), first and last seen two probes each of `jobs_dlq_signature_idx`,
    whatever the size of the DLQ."""
    largest = stats.dlq_largest("signature", limit)
    today = timezone.now().astimezone(tz).date()
    first_day = today - timedelta(days=days - 1)
    per_day = stats.dlq_days([signature for signature, _ in largest], tz, first_day)
    dlq = Job.objects.filter(in_dlq=True)
    groups = []
    for signature, count in largest:
        alike = (
            dlq.filter(error_signature__isnull=True)
            if signature is None
            else dlq.filter(error_signature=signature)
        )
        seen = alike.aggregate(first=Min("updated_at"), last=Max("updated_at"))
        groups.append(
            DlqGroup(
                signature=signature,
                count=count,
                first_seen=seen["first"],
                last_seen=seen["last"],
                per_day=[
                    per_day.get((signature, first_day + timedelta(days=i)), 0) for i in range(days)
                ],
            )
        )
    return groups


def failures_over_time(
    tz: tzinfo, now: datetime, hours: int = stats.FAILURE_HOURS
) -> list[tuple[datetime, int]]:
    """Failed attempts in each of the last `hours` real hours up to `now`, the last one the
    hour of `now` on the viewer's clock: from the failed attempts' counters (`jobs.stats`),
    whatever the failure rate. Stepped in real time, not on the clock, so a day that puts
    the clocks forward has no bar for the hour it skips (stepping on the clock, it was a bar
    always empty), and one that puts them back a bar for each of the two hours that read
    alike (they were one, and the 24 bars covered 25 hours). Where the offset is not whole
    hours (Kolkata, Kathmandu) an hour is still the clock's, from its :00; where the clocks
    moved by half an hour since (Lord Howe), the earlier hours start at :30."""
    local = now.astimezone(tz)
    # Stepped in UTC: arithmetic on a zone's local time steps its clock.
    last = now.astimezone(UTC) - timedelta(
        minutes=local.minute, seconds=local.second, microseconds=local.microsecond
    )
    first = last - timedelta(hours=hours - 1)
    counts = stats.failures_per_hour(first)
    # Looked up in UTC: a local time in the second of the repeated hours (`fold=1`) equals
    # no UTC time (PEP 495), and found no count.
    hour_starts = [first + timedelta(hours=i) for i in range(hours)]
    return [(start.astimezone(tz), counts.get(start, 0)) for start in hour_starts]


# --- one job ---------------------------------------------------------------------------------


# A job may wait for up to 1,000 upstream jobs (`state.MAX_UPSTREAM`) and hold up as many:
# Job Detail and DLQ Detail list this many each way and say how many more there are. Listing
# them all, a join of 1,000 was a 600 kB page of 1,027 queries (1.4 s): each pill asked
# whether its job's queue is paused.
DEPENDENCIES_LISTED = 50


@dataclass(frozen=True)
class JobGraph:
    # The first `DEPENDENCIES_LISTED` each way, the unfinished first, and how many in all.
    upstream: list[Job]
    downstream: list[Job]
    previous_run: Job | None
    next_run: Job | None
    upstream_total: int
    downstream_total: int

    @property
    def upstream_more(self) -> int:
        return self.upstream_total - len(self.upstream)

    @property
    def downstream_more(self) -> int:
        return self.downstream_total - len(self.downstream)


def job_with_history(job_id: uuid.UUID) -> Job | None:
    return (
        Job.objects.select_related("worker", "previous_run")
        .prefetch_related("attempts__worker")
        .filter(id=job_id)
        .first()
    )


def recent_logs(job: Job, limit: int = 500) -> tuple[list[JobLog], bool]:
    """The job's last `limit` log lines, oldest first, and whether older ones were left out."""
    newest = list(job.logs.order_by("-created_at", "-id")[: limit + 1])
    return newest[:limit][::-1], len(newest) > limit


def raw_json(job_id: uuid.UUID, field: Literal["payload", "result"]) -> str | None:
    """A job's payload or result as PostgreSQL prints it, with no Python round trip whatever
    its depth. None when there is no such job, or no result yet."""
    raw: str | None = (
        Job.objects.filter(id=job_id)
        .annotate(raw=Cast(field, output_field=TextField()))
        .values_list("raw", flat=True)
        .first()
    )
    return raw


def job_graph(job: Job) -> JobGraph:
    upstream, upstream_total = _listed(JobDependency.objects.filter(job=job), "depends_on_id")
    downstream, downstream_total = _listed(JobDependency.objects.filter(depends_on=job), "job_id")
    return JobGraph(
        upstream=upstream,
        downstream=downstream,
        previous_run=job.previous_run,
        next_run=Job.objects.filter(previous_run=job).first(),
        upstream_total=upstream_total,
        downstream_total=downstream_total,
    )


def _listed(edges: QuerySet[JobDependency], far: str) -> tuple[list[Job], int]:
    """The jobs at the `far` end of `edges`, at most `DEPENDENCIES_LISTED`: those still to
    finish first (what the job waits for, or what waits on it), then oldest first; read with
    what their pills need. And how many there are in all, counted only past the list."""
    finished = Q(status__in=[JobStatus.COMPLETED, JobStatus.CANCELLED])
    jobs = list(
        with_queue_paused(Job.objects.filter(id__in=edges.values(far)))
        .only("id", "type", "status", "in_dlq", "pending_dependencies", "queue", "created_at")
        .order_by(ExpressionWrapper(finished, output_field=BooleanField()).asc(), "created_at")[
            : DEPENDENCIES_LISTED + 1
        ]
    )
    if len(jobs) <= DEPENDENCIES_LISTED:
        return jobs, len(jobs)
    return jobs[:DEPENDENCIES_LISTED], edges.count()


def confirmed_dlq(as_of: datetime) -> QuerySet[Job]:
    """The whole DLQ as a confirmation page shown at `as_of` counts it, newest first: only
    the dead letters unchanged since, by the bulk actions' rule (`bulk.Selection`)."""
    return bulk.Selection(query={}, dlq=True, as_of=as_of).jobs().order_by("-updated_at")


def bulk_retry_targets(ids: list[uuid.UUID] | None, as_of: datetime) -> QuerySet[Job]:
    """The DLQ jobs a bulk retry would take: the selected ones, or the whole DLQ as of
    `as_of`."""
    return confirmed_dlq(as_of) if ids is None else dlq_jobs().filter(id__in=ids)


# --- the running configuration ----------------------------------------------------------------

MASK = "••••••••"
_SHOWN_SETTINGS = (
    "DEBUG",
    "ALLOWED_HOSTS",
    "CSRF_TRUSTED_ORIGINS",
    "SECRET_KEY",
    "DATABASE_URL",
    "REDIS_URL",
    "TIME_ZONE",
    "EMAIL_BACKEND",
    "DEFAULT_FROM_EMAIL",
    "LOG_LEVEL",
)
_SHOWN_PREFIXES = ("API_", "SCHEDULER_", "CONSOLE_", "SSE_", "WEBHOOK")
# A setting, or a query parameter of a URL (redis-py and libpq read a password there too), whose
# name holds one of these words holds a secret.
_SECRET_WORDS = ("SECRET", "PASS", "TOKEN", "KEY", "PRIVATE", "CREDENTIAL")
# A name ending so says how much or how often (`API_TOKEN_FAILURE_LIMIT`), never a secret.
_QUANTITY_ENDINGS = ("_LIMIT", "_SECONDS", "_SIZE", "_BYTES", "_COUNT", "_INTERVAL", "_TIMEOUT")


def _names_a_secret(name: str) -> bool:
    name = name.upper()
    return any(word in name for word in _SECRET_WORDS) and not name.endswith(_QUANTITY_ENDINGS)


def mask_value(name: str, value: object) -> str:
    """A setting as the Settings page may show it: secrets hidden, a URL's passwords masked,
    bidirectional controls shown as escapes (`display.reveal_bidi`)."""
    if _names_a_secret(name):
        return MASK if value else "(not set)"
    text = ", ".join(map(str, value)) if isinstance(value, list | tuple) else str(value)
    if not text:
        return "(empty)"
    return reveal_bidi(_masked_url(text))


def _masked_url(text: str) -> str:
    """`text` as written, but for the password of its user info and the values of its secret
    query parameters, when it is a URL. The rest is left as it is: rebuilt from its parts, a
    URL lost the brackets of an IPv6 host, and `unix:///path` its slashes."""
    try:
        parts = urlsplit(text)
    except ValueError:
        return text
    shown = text
    if parts.password:
        user_info, _, host = parts.netloc.rpartition("@")
        user = user_info.partition(":")[0]
        shown = shown.replace(f"//{parts.netloc}", f"//{user}:{MASK}@{host}", 1)
    if parts.query:
        query = "&".join(map(_masked_parameter, parts.query.split("&")))
        shown = shown.replace(f"?{parts.query}", f"?{query}", 1)
    return shown


def _masked_parameter(parameter: str) -> str:
    name, _, value = parameter.partition("=")
    return f"{name}={MASK}" if value and _names_a_secret(unquote_plus(name)) else parameter


def running_configuration() -> list[tuple[str, str]]:
    names = [
        *_SHOWN_SETTINGS,
        *sorted(n for n in dir(settings) if n.startswith(_SHOWN_PREFIXES) and n.isupper()),
    ]
    return [
        (name, mask_value(name, getattr(settings, name)))
        for name in names
        if hasattr(settings, name)
    ]
