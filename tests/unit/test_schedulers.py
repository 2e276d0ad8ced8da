"""One conformance suite for every `JobScheduler`, checked against a sorted() oracle."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.scheduling import virtual_deadline
from tests.unit.test_deadline import continuous_score
from worker.schedulers import (
    JobScheduler,
    MinHeapScheduler,
    ScheduledJob,
    SkipListScheduler,
    make_scheduler,
)

BASE = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
# A small pool of ids so that sequences hit duplicates, removals of held jobs and of unknown ones.
IDS = [uuid.UUID(int=n * 0x9E3779B97F4A7C15 + 1) for n in range(12)]

IMPLEMENTATIONS = pytest.mark.parametrize(
    "make", [MinHeapScheduler, lambda: SkipListScheduler(seed=7)], ids=["heap", "skiplist"]
)


def job(
    job_id: uuid.UUID | None = None,
    priority: int = 2,
    ready: timedelta = timedelta(0),
    created: timedelta = timedelta(0),
) -> ScheduledJob:
    return ScheduledJob(job_id or uuid.uuid4(), priority, BASE + ready, BASE + created)


def spec_order(entry: ScheduledJob) -> tuple[datetime, datetime, uuid.UUID]:
    """engine.md's order, written from the spec rather than from the entry's key."""
    return (virtual_deadline(entry.priority, entry.ready_at), entry.created_at, entry.job_id)


def drain(scheduler: JobScheduler) -> list[ScheduledJob]:
    popped = []
    while len(scheduler):
        popped.append(scheduler.pop())
    return popped


# Coarse times make ties on the deadline and on created_at frequent, so tie-breaks are tested.
entries = st.builds(
    job,
    job_id=st.sampled_from(IDS),
    priority=st.integers(1, 3),
    ready=st.integers(-3, 6).map(lambda m: timedelta(minutes=10 * m)),
    created=st.integers(0, 3).map(lambda s: timedelta(seconds=s)),
)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("insert"), entries),
        st.tuples(st.just("pop"), st.none()),
        st.tuples(st.just("contains"), st.sampled_from(IDS)),
    ),
    max_size=120,
)


@IMPLEMENTATIONS
@settings(max_examples=300, deadline=None)
@given(ops=operations)
def test_random_operations_match_a_sorted_oracle(
    make: Callable[[], JobScheduler], ops: list[tuple[str, object]]
) -> None:
    scheduler = make()
    oracle: dict[uuid.UUID, ScheduledJob] = {}
    for op, arg in ops:
        expected = sorted(oracle.values(), key=spec_order)
        if op == "insert":
            assert isinstance(arg, ScheduledJob)
            scheduler.insert(arg)
            oracle[arg.job_id] = arg  # a duplicate id replaces the held entry
        elif op == "pop":
            if expected:
                assert scheduler.pop() == expected[0]
                del oracle[expected[0].job_id]
            else:
                with pytest.raises(IndexError):
                    scheduler.pop()
        else:
            assert (arg in scheduler) is (arg in oracle)
        assert len(scheduler) == len(oracle)
    assert drain(scheduler) == sorted(oracle.values(), key=spec_order)


@IMPLEMENTATIONS
@settings(max_examples=200, deadline=None)
@given(
    jobs=st.lists(
        st.builds(
            job,
            priority=st.integers(1, 3),
            ready=st.integers(0, 10**7).map(lambda ms: timedelta(milliseconds=ms)),
            created=st.integers(0, 10**7).map(lambda ms: timedelta(milliseconds=ms)),
        ),
        max_size=60,
    ),
    now_ms=st.integers(10**7, 10**9),
)
def test_pop_order_is_the_continuous_score_order_at_any_moment(
    make: Callable[[], JobScheduler], jobs: list[ScheduledJob], now_ms: int
) -> None:
    now = BASE + timedelta(milliseconds=now_ms)  # every job is already runnable
    scheduler = make()
    for entry in jobs:
        scheduler.insert(entry)
    by_score = sorted(
        jobs,
        key=lambda e: (continuous_score(e.priority, e.ready_at, now), e.created_at, e.job_id),
    )
    assert drain(scheduler) == by_score


@IMPLEMENTATIONS
def test_aging_lets_an_old_low_priority_job_overtake_fresh_urgent_ones(
    make: Callable[[], JobScheduler],
) -> None:
    scheduler = make()
    old_low = job(priority=3, ready=timedelta(minutes=-45))  # deadline +15 min
    fresh_high = job(priority=1)  # deadline +20 min
    middle = job(priority=2, ready=timedelta(minutes=-22))  # deadline +18 min
    for entry in (fresh_high, middle, old_low):
        scheduler.insert(entry)
    assert drain(scheduler) == [old_low, middle, fresh_high]


@IMPLEMENTATIONS
def test_ties_go_to_the_earlier_created_then_the_smaller_id(
    make: Callable[[], JobScheduler],
) -> None:
    scheduler = make()
    # Same virtual deadline (priority 1 ready 20 min later = priority 2 ready now).
    late_created = job(priority=2, created=timedelta(seconds=5))
    small_id = job(uuid.UUID(int=1), priority=1, ready=timedelta(minutes=-20))
    big_id = job(uuid.UUID(int=2), priority=2)
    for entry in (late_created, big_id, small_id):
        scheduler.insert(entry)
    assert drain(scheduler) == [small_id, big_id, late_created]


@IMPLEMENTATIONS
def test_a_job_back_for_a_retry_is_popped_once_at_its_new_place(
    make: Callable[[], JobScheduler],
) -> None:
    scheduler = make()
    jobs = [job(priority=1 + n % 3, ready=timedelta(seconds=n)) for n in range(500)]
    for entry in jobs:
        scheduler.insert(entry)
    retries = [
        job(entry.job_id, entry.priority, ready=timedelta(hours=1, seconds=n))
        for n, entry in enumerate(jobs[::2])
    ]
    for entry in retries:
        scheduler.insert(entry)
    assert len(scheduler) == 500
    assert drain(scheduler) == sorted([*jobs[1::2], *retries], key=spec_order)


@IMPLEMENTATIONS
def test_empty_scheduler(make: Callable[[], JobScheduler]) -> None:
    scheduler = make()
    assert len(scheduler) == 0
    with pytest.raises(IndexError):
        scheduler.pop()
    assert uuid.uuid4() not in scheduler
    assert "not-a-uuid" not in scheduler


@IMPLEMENTATIONS
def test_duplicate_insert_replaces_the_held_entry(make: Callable[[], JobScheduler]) -> None:
    scheduler = make()
    job_id = uuid.uuid4()
    first_run = job(job_id, priority=1)
    other = job(priority=1, ready=timedelta(minutes=5))
    retry = job(job_id, priority=1, ready=timedelta(minutes=30))
    scheduler.insert(first_run)
    scheduler.insert(other)
    scheduler.insert(retry)
    assert len(scheduler) == 2
    assert drain(scheduler) == [other, retry]


@IMPLEMENTATIONS
def test_replacement_with_the_same_deadline_still_replaces(
    make: Callable[[], JobScheduler],
) -> None:
    scheduler = make()
    job_id = uuid.uuid4()
    # Both fall due at +40 min: same sort key, yet a different job state to hand out.
    scheduler.insert(job(job_id, priority=1, ready=timedelta(minutes=20)))
    replacement = job(job_id, priority=3, ready=timedelta(minutes=-20))
    scheduler.insert(replacement)
    assert len(scheduler) == 1
    popped = scheduler.pop()
    assert (popped.priority, popped.ready_at) == (3, replacement.ready_at)
    assert len(scheduler) == 0
    with pytest.raises(IndexError):
        scheduler.pop()


@IMPLEMENTATIONS
def test_identical_reinsert_changes_nothing(make: Callable[[], JobScheduler]) -> None:
    scheduler = make()
    entry = job()
    scheduler.insert(entry)
    scheduler.insert(entry)
    scheduler.insert(job(entry.job_id))  # an equal entry built again from the same row
    assert len(scheduler) == 1
    assert scheduler.pop() == entry
    with pytest.raises(IndexError):
        scheduler.pop()


@IMPLEMENTATIONS
def test_a_popped_job_inserted_again_is_popped_once(make: Callable[[], JobScheduler]) -> None:
    scheduler = make()
    entry = job()
    scheduler.insert(entry)
    assert scheduler.pop() == entry
    scheduler.insert(entry)
    assert len(scheduler) == 1
    assert drain(scheduler) == [entry]


def test_heap_storage_shrinks_once_stale_slots_pass_half() -> None:
    scheduler = MinHeapScheduler()
    jobs = [job(ready=timedelta(seconds=n)) for n in range(100)]
    for entry in jobs:
        scheduler.insert(entry)
    for round_ in range(1, 21):  # every job comes back for a retry, twenty times over
        for entry in jobs:
            scheduler.insert(job(entry.job_id, ready=timedelta(minutes=round_)))
    assert len(scheduler) == 100
    assert len(scheduler._heap) + len(scheduler._arrivals) <= 2 * len(scheduler) + 1  # rebuilt
    assert [e.job_id for e in drain(scheduler)] == sorted(
        (e.job_id for e in jobs), key=lambda job_id: job_id.int
    )


def test_make_scheduler_names() -> None:
    assert isinstance(make_scheduler(), MinHeapScheduler)
    assert isinstance(make_scheduler("heap"), MinHeapScheduler)
    assert isinstance(make_scheduler("skiplist"), SkipListScheduler)
    with pytest.raises(ValueError, match="Unknown scheduler 'fifo'; choose one of: heap, skiplist"):
        make_scheduler("fifo")


def test_entry_from_a_database_row_and_from_the_api_job_object() -> None:
    job_id = uuid.uuid4()
    row = {"id": job_id, "priority": 3, "run_at": BASE, "created_at": BASE, "type": "noop"}
    api = {
        "id": str(job_id),
        "priority": 3,
        "run_at": "2026-03-01T12:00:00.000Z",
        "created_at": "2026-03-01T13:00:00.000+01:00",
    }
    from_row = ScheduledJob.from_row(row)
    assert from_row == ScheduledJob.from_row(api)
    assert from_row.virtual_deadline == BASE + timedelta(hours=1)
    assert from_row.key == ScheduledJob.from_row(api).key


def test_entry_times_in_other_zones_order_by_the_instant() -> None:
    plus_two = timezone(timedelta(hours=2))
    earlier = ScheduledJob(uuid.uuid4(), 2, datetime(2026, 3, 1, 13, 0, tzinfo=plus_two), BASE)
    later = job(priority=2)
    scheduler = MinHeapScheduler()
    scheduler.insert(later)
    scheduler.insert(earlier)
    assert scheduler.pop() == earlier


def test_entry_refuses_naive_times() -> None:
    with pytest.raises(ValueError, match="ready_at must be timezone-aware"):
        ScheduledJob(uuid.uuid4(), 1, datetime(2026, 3, 1), BASE)
    with pytest.raises(TypeError, match="run_at must be a datetime"):
        ScheduledJob.from_row({"id": uuid.uuid4(), "priority": 1, "run_at": 5, "created_at": BASE})


@IMPLEMENTATIONS
def test_key_fields_never_bleed_into_each_other(make: Callable[[], JobScheduler]) -> None:
    # The key packs deadline, created_at and id in one integer: the extremes of the later
    # fields must not outweigh one microsecond of the earlier ones.
    first_day = datetime(1, 1, 1, tzinfo=UTC)
    last_minute = datetime(9999, 12, 31, 23, 59, tzinfo=UTC)
    sooner = ScheduledJob(uuid.UUID(int=2**128 - 1), 1, BASE, last_minute)
    later = ScheduledJob(uuid.UUID(int=0), 1, BASE + timedelta(microseconds=1), first_day)
    older_big_id = ScheduledJob(uuid.UUID(int=2**128 - 2), 3, last_minute, first_day)
    newer_small_id = ScheduledJob(
        uuid.UUID(int=1), 3, last_minute, first_day + timedelta(microseconds=1)
    )
    scheduler = make()
    for entry in (newer_small_id, later, older_big_id, sooner):
        scheduler.insert(entry)
    assert drain(scheduler) == [sooner, later, older_big_id, newer_small_id]


def test_heap_storage_stays_bounded_when_one_entry_is_inserted_over_and_over() -> None:
    scheduler = MinHeapScheduler()
    entry = job()
    for _ in range(1000):
        scheduler.insert(entry)
        scheduler.insert(entry)
        assert scheduler.pop() == entry
    scheduler.insert(entry)
    assert len(scheduler) == 1
    assert len(scheduler._heap) + len(scheduler._arrivals) <= 2 * 64
    assert drain(scheduler) == [entry]
