"""The failed-token limit under concurrent requests from one address: each was checked
against the count before any of them had added its failure, so a burst of guesses sent at
once had more of them checked than `API_TOKEN_FAILURE_LIMIT` allows."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone
from rest_framework.test import APIClient

from jobs.models import FailedTokenCount

from .test_job_routes import assert_error

JOBS = "/api/v1/jobs"
ADDRESS = "203.0.113.90"
# Rounds of two concurrent failures: enough that a deadlock between them shows.
TRIES = 150


def at_once(requests: list[Callable[[], Any]]) -> list[Any]:
    """The answers to `requests`, each sent on a thread of its own, all let go together."""
    start = threading.Barrier(len(requests))
    answers: list[Any] = [None] * len(requests)

    def send(index: int) -> None:
        try:
            start.wait()
            answers[index] = requests[index]()
        finally:
            connection.close()

    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(requests))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert all(answer is not None for answer in answers)
    return answers


def guess(n: int) -> Callable[[], Any]:
    return lambda: APIClient(REMOTE_ADDR=ADDRESS).get(
        JOBS, HTTP_AUTHORIZATION=f"Bearer jsk_guess-{n}"
    )


@pytest.mark.django_db(transaction=True)
def test_a_burst_of_guesses_from_one_address_has_no_more_checked_than_the_limit(
    settings, viewer_client
):
    settings.API_TOKEN_FAILURE_LIMIT = "5/min"
    answers = at_once([guess(n) for n in range(30)])

    assert Counter(answer.status_code for answer in answers) == {401: 5, 429: 25}
    codes = {401: "not_authenticated", 429: "rate_limited"}
    for answer in answers:
        assert_error(answer, answer.status_code, codes[answer.status_code])
    # The address is refused for the rest of the period, good token or not.
    good = viewer_client._credentials["HTTP_AUTHORIZATION"]
    refused = APIClient(REMOTE_ADDR=ADDRESS).get(JOBS, HTTP_AUTHORIZATION=good)
    assert_error(refused, 429, "rate_limited")


@pytest.mark.django_db(transaction=True)
def test_a_burst_of_good_requests_from_one_address_is_served_and_counts_nothing(
    settings, viewer_client
):
    settings.API_TOKEN_FAILURE_LIMIT = "5/min"
    good = viewer_client._credentials["HTTP_AUTHORIZATION"]
    answers = at_once(
        [lambda: APIClient(REMOTE_ADDR=ADDRESS).get(JOBS, HTTP_AUTHORIZATION=good)] * 30
    )
    assert [answer.status_code for answer in answers] == [200] * 30
    assert not FailedTokenCount.objects.exists()


def waiting_on_locks() -> int:
    """The statements of this database that wait for a lock, now (not as of this
    transaction's first look, which PostgreSQL would otherwise keep)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0]


def wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def in_thread(request: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    answer: list[Any] = []

    def send() -> None:
        try:
            answer.append(request())
        finally:
            connection.close()

    thread = threading.Thread(target=send)
    thread.start()
    return thread, answer


@pytest.mark.django_db(transaction=True)
def test_a_good_token_sent_while_a_guess_is_being_counted_is_judged_after_that_guess(
    settings, viewer_client
):
    # A good token's answer was read from the count as it stood, without waiting for the
    # guesses before it to be counted: among guesses sent at once, a good one was answered
    # 200 as if it had come first, whatever the limit.
    settings.API_TOKEN_FAILURE_LIMIT = "5/min"
    good = viewer_client._credentials["HTTP_AUTHORIZATION"]
    for n in range(4):
        assert guess(n)().status_code == 401
    with transaction.atomic():
        # Held here, the address's count keeps the fifth guess waiting while it is counted.
        FailedTokenCount.objects.select_for_update().get(address=ADDRESS)
        fifth, fifth_answer = in_thread(guess(4))
        wait_until(lambda: waiting_on_locks() == 1)
        late, late_answer = in_thread(
            lambda: APIClient(REMOTE_ADDR=ADDRESS).get(JOBS, HTTP_AUTHORIZATION=good)
        )
        wait_until(lambda: bool(late_answer) or waiting_on_locks() == 2)
    fifth.join(timeout=60)
    late.join(timeout=60)
    assert_error(fifth_answer[0], 401, "not_authenticated")
    assert_error(late_answer[0], 429, "rate_limited")


@pytest.mark.django_db(transaction=True)
def test_guesses_from_two_addresses_whose_periods_ended_are_each_counted(settings):
    # A failure deletes the ended periods of other addresses: two failures that deleted
    # each other's row before counting in their own waited on each other, a deadlock
    # PostgreSQL broke by failing one of them (503), a few times in a hundred tries.
    settings.API_TOKEN_FAILURE_LIMIT = "5/min"
    addresses = ["198.51.100.1", "198.51.100.2"]
    guesses = [
        lambda address=address: APIClient(REMOTE_ADDR=address).get(
            JOBS, HTTP_AUTHORIZATION="Bearer jsk_guess"
        )
        for address in addresses
    ]
    for _ in range(TRIES):
        ended = timezone.now() - timedelta(seconds=1)
        FailedTokenCount.objects.all().delete()
        FailedTokenCount.objects.bulk_create(
            FailedTokenCount(address=address, failures=5, period_ends=ended)
            for address in addresses
        )
        assert [answer.status_code for answer in at_once(guesses)] == [401, 401]
        counted = dict(FailedTokenCount.objects.values_list("address", "failures"))
        assert counted == dict.fromkeys(addresses, 1)
