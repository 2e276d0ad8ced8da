"""GET /jobs: every filter, every ordering, pagination bounds, and a constant query count."""

from __future__ import annotations

import uuid
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobs.filters import ORDERING_FIELDS, TIME_FIELDS
from jobs.models import Job, JobDependency

from .conftest import T0, iso, ms
from .test_job_routes import assert_error

pytestmark = pytest.mark.django_db

JOBS = "/api/v1/jobs"
HOUR = timedelta(hours=1)
PAGE_AND_CURSOR = "Not with cursor: walk a list by page or by cursor, not both."


def ids(response):
    assert response.status_code == 200, response.content
    return [job["id"] for job in response.json()["results"]]


def id_set(response):
    return set(ids(response))


def test_default_order_is_newest_first(viewer_client, job_row):
    jobs = [job_row(created_at=T0 + n * HOUR) for n in range(3)]
    assert ids(viewer_client.get(JOBS)) == [str(job.id) for job in reversed(jobs)]


def test_list_items_are_job_objects(viewer_client, job_row):
    upstream = job_row()
    downstream = job_row(created_at=T0 + HOUR)
    JobDependency.objects.create(job=downstream, depends_on=upstream)
    first = viewer_client.get(JOBS).json()["results"][0]
    assert first["id"] == str(downstream.id)
    assert first["depends_on"] == str(upstream.id)
    assert first["created_at"] == iso(T0 + HOUR)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("pending", {"pending"}),
        ("processing", {"processing"}),
        ("completed", {"completed"}),
        ("cancelled", {"cancelled"}),
        ("failed", {"retrying"}),
        ("dlq", {"dlq"}),
    ],
)
def test_status_filter_tells_retrying_from_dlq(viewer_client, job_row, value, expected):
    made = {
        "pending": job_row(status="pending"),
        "processing": job_row(status="processing"),
        "completed": job_row(status="completed"),
        "cancelled": job_row(status="cancelled"),
        "retrying": job_row(status="failed", in_dlq=False),
        "dlq": job_row(status="failed", in_dlq=True),
    }
    wanted = {str(made[name].id) for name in expected}
    assert id_set(viewer_client.get(JOBS, {"status": value})) == wanted


@pytest.mark.parametrize("priority", [1, 2, 3])
def test_priority_filter(viewer_client, job_row, priority):
    made = {p: job_row(priority=p) for p in (1, 2, 3)}
    assert ids(viewer_client.get(JOBS, {"priority": priority})) == [str(made[priority].id)]


def test_type_filter(viewer_client, job_row):
    email = job_row(type="send_email")
    job_row(type="noop")
    assert ids(viewer_client.get(JOBS, {"type": "send_email"})) == [str(email.id)]
    assert ids(viewer_client.get(JOBS, {"type": "unknown"})) == []


def test_recur_interval_filter(viewer_client, job_row):
    hourly = job_row(recur_interval="every_1_hour")
    job_row(recur_interval="every_1_minute")
    job_row()
    assert ids(viewer_client.get(JOBS, {"recur_interval": "every_1_hour"})) == [str(hourly.id)]


@pytest.mark.parametrize("name", list(TIME_FIELDS))
@pytest.mark.parametrize("form", [ms, iso], ids=["unix_ms", "iso"])
def test_time_range_filters(viewer_client, job_row, name, form):
    """`<name>_after` includes its instant, `<name>_before` excludes it, in ms or ISO."""
    field = TIME_FIELDS[name]
    early, at, late = (job_row(**{field: T0 + offset * HOUR}) for offset in (-2, 0, 2))
    if field not in ("created_at", "scheduled_at", "updated_at"):
        job_row()  # the field is null: never inside a range
    assert id_set(viewer_client.get(JOBS, {f"{name}_after": form(T0)})) == {
        str(at.id),
        str(late.id),
    }
    assert id_set(viewer_client.get(JOBS, {f"{name}_before": form(T0)})) == {str(early.id)}
    window = {f"{name}_after": form(T0 - 3 * HOUR), f"{name}_before": form(T0 + HOUR)}
    assert id_set(viewer_client.get(JOBS, window)) == {str(early.id), str(at.id)}


@pytest.mark.parametrize(
    "name", [f"{n}_{side}" for n in TIME_FIELDS for side in ("before", "after")]
)
def test_time_filter_that_does_not_parse_is_400_naming_it(viewer_client, name):
    error = assert_error(viewer_client.get(JOBS, {name: "yesterday"}), 400, "validation_error")
    assert list(error["details"]) == [name]


def test_iso_with_offset_and_unencoded_plus_are_understood(viewer_client, job_row):
    job = job_row(created_at=T0)
    assert ids(viewer_client.get(JOBS, {"created_after": "2026-06-11T14:00:00+02:00"})) == [
        str(job.id)
    ]
    # A '+' typed into a URL arrives as a space.
    response = viewer_client.get(JOBS + "?created_after=2026-06-11T14:00:01+02:00")
    assert ids(response) == []


def test_filters_combine(viewer_client, job_row):
    wanted = job_row(type="noop", priority=1, status="completed")
    job_row(type="noop", priority=2, status="completed")
    job_row(type="noop", priority=1, status="pending")
    response = viewer_client.get(JOBS, {"type": "noop", "priority": 1, "status": "completed"})
    assert ids(response) == [str(wanted.id)]


@pytest.mark.parametrize(
    ("param", "value"),
    [
        ("status", "done"),
        ("priority", "4"),
        ("priority", "high"),
        ("recur_interval", "daily"),
        ("ordering", "id"),
        ("ordering", "-payload"),
        ("page", "0"),
        ("page", "first"),
        ("limit", "0"),
        ("limit", "51"),
        ("limit", "-5"),
        ("statuss", "pending"),
    ],
)
def test_bad_query_value_is_400_naming_the_parameter(viewer_client, param, value):
    error = assert_error(viewer_client.get(JOBS, {param: value}), 400, "validation_error")
    assert list(error["details"]) == [param]


@pytest.mark.parametrize("field", ORDERING_FIELDS)
@pytest.mark.parametrize("descending", [False, True])
def test_each_ordering(viewer_client, job_row, field, descending):
    values = {
        "priority": [3, 1, 2],
        "attempt_count": [2, 0, 1],
        "max_retries": [5, 1, 3],
        "created_at": [T0 + 2 * HOUR, T0, T0 + HOUR],
        "scheduled_at": [T0 + 2 * HOUR, T0, T0 + HOUR],
        "virtual_deadline": [T0 + 2 * HOUR, T0, T0 + HOUR],
    }[field]
    jobs = [job_row(**{field: value}) for value in values]
    expected = [str(job.id) for _, job in sorted(zip(values, jobs, strict=True))]
    if descending:
        expected.reverse()
    ordering = f"-{field}" if descending else field
    assert ids(viewer_client.get(JOBS, {"ordering": ordering})) == expected


def test_ties_are_broken_by_id_so_pages_are_stable(viewer_client, job_row):
    jobs = sorted((job_row(priority=2) for _ in range(7)), key=lambda job: str(job.id))
    pages = [
        ids(viewer_client.get(JOBS, {"ordering": "priority", "limit": 3, "page": page}))
        for page in (1, 2, 3)
    ]
    assert [job_id for page in pages for job_id in page] == [str(job.id) for job in jobs]


@pytest.mark.parametrize("field", ["priority", "attempt_count", "max_retries", "scheduled_at"])
def test_equal_keys_list_oldest_first_and_descending_is_the_exact_reverse(
    viewer_client, job_row, field
):
    low, high = {"scheduled_at": (T0, T0 + HOUR)}.get(field, (1, 2))
    # Two jobs of the same instant on each key, so that only the id tells them apart.
    jobs = [
        job_row(**{field: key, "created_at": T0 + created * HOUR})
        for key in (high, low)
        for created in (1, 0, 1)
    ]
    ascending = sorted(jobs, key=lambda job: (getattr(job, field), job.created_at, str(job.id)))
    assert ids(viewer_client.get(JOBS, {"ordering": field})) == [str(job.id) for job in ascending]
    assert ids(viewer_client.get(JOBS, {"ordering": f"-{field}"})) == [
        str(job.id) for job in reversed(ascending)
    ]


def test_the_default_list_breaks_equal_times_by_id_and_created_at_is_its_reverse(
    viewer_client, job_row
):
    jobs = [job_row(created_at=T0 + created * HOUR) for created in (1, 0, 1, 0)]
    newest_first = sorted(jobs, key=lambda job: (-job.created_at.timestamp(), str(job.id)))
    assert ids(viewer_client.get(JOBS)) == [str(job.id) for job in newest_first]
    assert ids(viewer_client.get(JOBS, {"ordering": "created_at"})) == [
        str(job.id) for job in reversed(newest_first)
    ]


def link(url):
    parts = urlsplit(url)
    assert (parts.scheme, parts.netloc) == ("http", "testserver")
    return parts.path, parse_qs(parts.query)


def test_pagination_links_and_bounds(viewer_client, job_row):
    jobs = [job_row(created_at=T0 + n * HOUR) for n in range(5)]
    newest_first = [str(job.id) for job in reversed(jobs)]
    first = viewer_client.get(JOBS, {"limit": 2, "type": "noop"}).json()
    assert first["count"] == 5
    assert [job["id"] for job in first["results"]] == newest_first[:2]
    assert first["previous"] is None
    assert link(first["next"]) == (
        "/api/v1/jobs",
        {"limit": ["2"], "type": ["noop"], "page": ["2"]},
    )
    second = viewer_client.get(first["next"]).json()
    assert [job["id"] for job in second["results"]] == newest_first[2:4]
    assert link(second["previous"]) == ("/api/v1/jobs", {"limit": ["2"], "type": ["noop"]})
    third = viewer_client.get(second["next"]).json()
    assert [job["id"] for job in third["results"]] == newest_first[4:]
    assert third["next"] is None
    assert link(third["previous"])[1]["page"] == ["2"]
    error = assert_error(viewer_client.get(JOBS, {"limit": 2, "page": 4}), 404, "not_found")
    assert "past the end" in error["message"]
    # A page whose first row would be past any table PostgreSQL can hold (its OFFSET is a
    # bigint) is past the end too, on every list.
    for route in (JOBS, f"{JOBS}/dlq"):
        error = assert_error(viewer_client.get(route, {"page": 10**20}), 404, "not_found")
        assert error["message"].startswith(f"Page {10**20} is past the end")


def test_default_page_size_is_20_and_50_is_the_maximum(viewer_client, job_row):
    for n in range(51):
        job_row(created_at=T0 + n * timedelta(seconds=1))
    assert len(ids(viewer_client.get(JOBS))) == 20
    assert len(ids(viewer_client.get(JOBS, {"limit": 50}))) == 50
    assert_error(viewer_client.get(JOBS, {"limit": 51}), 400, "validation_error")


def test_empty_list_is_one_empty_page(viewer_client):
    response = viewer_client.get(JOBS)
    assert response.json() == {
        "count": 0,
        "count_exact": True,
        "next": None,
        "previous": None,
        "results": [],
    }
    assert_error(viewer_client.get(JOBS, {"page": 2}), 404, "not_found")


def test_list_query_count_does_not_grow_with_the_page(viewer_client, job_row):
    def queries_for(limit):
        with CaptureQueriesContext(connection) as captured:
            assert len(ids(viewer_client.get(JOBS, {"limit": limit}))) == limit
        return len(captured)

    upstream = job_row(created_at=T0 - HOUR)
    for n in range(30):
        job = job_row(created_at=T0 + n * timedelta(seconds=1))
        JobDependency.objects.create(job=job, depends_on=upstream)
    # The token's first use records when it was used (then at most once a minute): not a
    # query of the list's, so it is out of the way before the two are compared.
    viewer_client.get(JOBS, {"limit": 1})
    assert queries_for(2) == queries_for(30)


def test_unknown_job_id_format_in_depends_on_filter_is_not_a_filter(viewer_client):
    error = assert_error(
        viewer_client.get(JOBS, {"depends_on": str(uuid.uuid4())}), 400, "validation_error"
    )
    assert error["details"] == {"depends_on": ["Unknown query parameter."]}


# --- cursors and bounded counts ---------------------------------------------------------------


def walk(client, params):
    """Every page of a cursor walk, each page's `next` followed, with `between(page)` run
    before the next request."""
    response = client.get(JOBS, {**params, "cursor": "first"})
    while True:
        assert response.status_code == 200, response.content
        body = response.json()
        assert body["previous"] is None
        yield body
        if body["next"] is None:
            return
        response = client.get(body["next"])


# Each list's whole order: its key, then the ties oldest first (newest first descending),
# then the id; the default list newest first, equal times by id.
WHOLE_ORDERS = {
    "-created_at": ("-created_at", "id"),
    "created_at": ("created_at", "-id"),
    "scheduled_at": ("scheduled_at", "created_at", "id"),
    "-scheduled_at": ("-scheduled_at", "-created_at", "-id"),
    "priority": ("priority", "created_at", "id"),
    "-priority": ("-priority", "-created_at", "-id"),
    "virtual_deadline": ("virtual_deadline", "created_at", "id"),
    "-virtual_deadline": ("-virtual_deadline", "-created_at", "-id"),
}


@pytest.mark.parametrize("ordering", WHOLE_ORDERS)
def test_a_cursor_walk_sees_each_row_once_while_rows_are_inserted(viewer_client, job_row, ordering):
    def row(created_at, scheduled_at, priority):
        return job_row(created_at=created_at, scheduled_at=scheduled_at, priority=priority)

    # Ties on every sort key: equal times, equal priorities.
    existing = []
    for n in range(23):
        scheduled = T0 + (n // 3) * HOUR
        existing.append(
            row(created_at=T0 + (n // 2) * HOUR, scheduled_at=scheduled, priority=1 + n % 3)
        )
    seen = []
    for number, page in enumerate(walk(viewer_client, {"limit": 4, "ordering": ordering})):
        seen += [job["id"] for job in page["results"]]
        # Inserted while the walk goes on: before, at and after its position.
        row(created_at=T0 + number * HOUR, scheduled_at=T0 + number * HOUR, priority=2)
        row(created_at=T0 - HOUR, scheduled_at=T0 + 20 * HOUR, priority=3)
        row(created_at=T0 + 30 * HOUR, scheduled_at=T0 - HOUR, priority=1)
    assert len(seen) == len(set(seen))
    assert {str(job.id) for job in existing} <= set(seen)
    # The walk is in the list's own order.
    everything = [
        str(i) for i in Job.objects.order_by(*WHOLE_ORDERS[ordering]).values_list("id", flat=True)
    ]
    assert seen == [job_id for job_id in everything if job_id in set(seen)]


def test_a_cursor_keeps_the_filters_and_refuses_a_forged_or_foreign_cursor(viewer_client, job_row):
    for n in range(5):
        job_row(created_at=T0 + n * HOUR, type="noop")
        job_row(created_at=T0 + n * HOUR, type="send_email", payload={"to": "a@example.com"})
    pages = list(walk(viewer_client, {"limit": 2, "type": "noop"}))
    assert [len(page["results"]) for page in pages] == [2, 2, 1]
    assert {job["type"] for page in pages for job in page["results"]} == {"noop"}
    assert parse_qs(urlsplit(pages[0]["next"]).query)["type"] == ["noop"]
    cursor = parse_qs(urlsplit(pages[0]["next"]).query)["cursor"][0]
    for forged in ["nonsense", "e30", cursor[:-3]]:
        error = assert_error(viewer_client.get(JOBS, {"cursor": forged}), 400, "validation_error")
        assert "cursor" in error["details"], forged
    other = viewer_client.get(JOBS, {"cursor": cursor, "ordering": "priority"})
    error = assert_error(other, 400, "validation_error")
    assert "another ordering" in error["details"]["cursor"][0]


def test_a_page_number_beside_a_cursor_is_refused_naming_both(viewer_client, job_row):
    # `page` was dropped without a word and the `next` link carried both, so a client that
    # paged by number through a cursor walk (or the other way) got pages it did not ask for.
    for n in range(3):
        job_row(created_at=T0 + n * HOUR, status="failed", in_dlq=True)
    cursor = parse_qs(urlsplit(next(walk(viewer_client, {"limit": 2}))["next"]).query)["cursor"]
    for route in (JOBS, f"{JOBS}/dlq"):
        for given in ("first", cursor[0]):
            for page in ("1", "2"):
                error = assert_error(
                    viewer_client.get(route, {"cursor": given, "page": page, "limit": 2}),
                    400,
                    "validation_error",
                )
                assert error["details"] == {"page": [PAGE_AND_CURSOR]}, (route, given, page)
        # Each still answers alone, and a wrong page number is named with the other.
        assert viewer_client.get(route, {"cursor": "first"}).status_code == 200
        assert viewer_client.get(route, {"page": "2", "limit": 2}).status_code == 200
        error = assert_error(
            viewer_client.get(route, {"cursor": "first", "page": "0", "limit": 51}),
            400,
            "validation_error",
        )
        assert error["details"] == {
            "page": ["Must be a positive integer.", PAGE_AND_CURSOR],
            "limit": ["Must be at most 50."],
        }


def test_counts_are_exact_up_to_the_limit_then_estimated(viewer_client, job_row, monkeypatch):
    monkeypatch.setattr("jobs.selectors.EXACT_COUNT_LIMIT", 3)
    for n in range(3):
        job_row(created_at=T0 + n * HOUR, type="noop")
    body = viewer_client.get(JOBS, {"limit": 2}).json()
    assert (body["count"], body["count_exact"]) == (3, True)
    for n in range(3):
        job_row(created_at=T0 + n * HOUR, type="send_email", payload={"to": "a@example.com"})
    body = viewer_client.get(JOBS, {"limit": 2}).json()
    assert body["count_exact"] is False and body["count"] >= 4
    assert viewer_client.get(JOBS, {"limit": 2, "type": "noop"}).json()["count_exact"] is True
    # Pages still end where the rows do, whatever the count says.
    assert ids(viewer_client.get(JOBS, {"limit": 2, "page": 3})) != []
    assert_error(viewer_client.get(JOBS, {"limit": 2, "page": 4}), 404, "not_found")


def test_a_format_no_renderer_writes_is_a_400_naming_the_formats(viewer_client):
    # DRF's answer was a bare 404 "Not found." for ?format=xml, as if the route were gone.
    error = assert_error(viewer_client.get(JOBS, {"format": "xml"}), 400, "validation_error")
    assert error["details"] == {"format": ["'xml' is not a format here: use json or api."]}
    assert viewer_client.get(JOBS, {"format": "json"}).status_code == 200
