"""Who a client is (X-Forwarded-For only behind trusted proxies), and the limits keyed on
it: the anonymous rate limit and failed token attempts."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db.models.expressions import RawSQL
from django.test import RequestFactory
from django.utils import timezone
from rest_framework.test import APIClient

from jobs.api.clients import client_address
from jobs.models import FailedTokenCount

from .test_job_routes import assert_error

pytestmark = pytest.mark.django_db

ROOT = "/api/v1/"
JOBS = "/api/v1/jobs"


@pytest.mark.parametrize(
    ("proxies", "forwarded", "expected"),
    [
        (0, None, "198.51.100.9"),
        (0, "203.0.113.7", "198.51.100.9"),
        (1, None, "198.51.100.9"),
        (1, "203.0.113.7", "203.0.113.7"),
        (1, "6.6.6.6, 203.0.113.7", "203.0.113.7"),
        (2, "6.6.6.6, 203.0.113.7, 10.0.0.2", "203.0.113.7"),
        (2, "203.0.113.7", "203.0.113.7"),
    ],
)
def test_the_client_is_read_behind_the_trusted_proxies_only(settings, proxies, forwarded, expected):
    settings.TRUSTED_PROXIES = proxies
    headers = {"HTTP_X_FORWARDED_FOR": forwarded} if forwarded else {}
    request = RequestFactory().get("/", REMOTE_ADDR="198.51.100.9", **headers)
    assert client_address(request) == expected


def test_the_anonymous_rate_limit_cannot_be_dodged_with_x_forwarded_for(settings):
    settings.API_RATE_LIMIT = "2/min"
    client = APIClient(REMOTE_ADDR="198.51.100.9")
    answers = [client.get(ROOT, HTTP_X_FORWARDED_FOR=f"203.0.113.{n}") for n in range(3)]
    assert [a.status_code for a in answers[:2]] == [200, 200]
    assert_error(answers[2], 429, "rate_limited")


def test_behind_a_trusted_proxy_clients_are_counted_apart_and_forged_entries_ignored(settings):
    settings.API_RATE_LIMIT = "2/min"
    settings.TRUSTED_PROXIES = 1
    proxy = APIClient(REMOTE_ADDR="10.0.0.2")
    for client in ["203.0.113.1", "203.0.113.2", "203.0.113.3"]:
        assert proxy.get(ROOT, HTTP_X_FORWARDED_FOR=client).status_code == 200
    forged = [
        proxy.get(ROOT, HTTP_X_FORWARDED_FOR=f"6.6.6.{n}, 203.0.113.1").status_code
        for n in range(2)
    ]
    assert forged == [200, 429]


def test_failed_token_attempts_are_limited_per_client_address(settings, viewer_client):
    settings.API_TOKEN_FAILURE_LIMIT = "3/min"
    good = viewer_client._credentials["HTTP_AUTHORIZATION"]
    guesser = APIClient(REMOTE_ADDR="203.0.113.66")
    for n in range(3):
        answer = guesser.get(JOBS, HTTP_AUTHORIZATION=f"Bearer jsk_guess-{n}")
        assert_error(answer, 401, "not_authenticated")

    # Now even a good token is refused from there, for the rest of the minute...
    refused = guesser.get(JOBS, HTTP_AUTHORIZATION=good)
    error = assert_error(refused, 429, "rate_limited")
    assert int(refused["Retry-After"]) == 60
    # Said as it is: a client sharing the address (a proxy, a NAT) learns why its good
    # token is refused, where the API's answer was that of a request rate.
    assert error["message"] == "Too many failed token attempts from this address: wait 60 s."
    stream = guesser.get("/api/jobs/stream", HTTP_AUTHORIZATION=good)
    assert stream.json()["error"]["message"] == error["message"]
    stream = guesser.get("/api/jobs/stream", HTTP_AUTHORIZATION=good)
    assert_error(stream, 429, "rate_limited")
    # ... while other addresses, and requests without a token, are served.
    assert (
        APIClient(REMOTE_ADDR="203.0.113.67").get(JOBS, HTTP_AUTHORIZATION=good).status_code == 200
    )
    assert guesser.get("/api/v1/health").status_code == 200


def test_a_refusal_for_failed_tokens_says_what_is_left_of_the_period(settings, viewer_client):
    settings.API_TOKEN_FAILURE_LIMIT = "3/min"
    good = viewer_client._credentials["HTTP_AUTHORIZATION"]
    guesser = APIClient(REMOTE_ADDR="203.0.113.68")
    for n in range(3):
        guesser.get(JOBS, HTTP_AUTHORIZATION=f"Bearer jsk_guess-{n}")
    # 40 s of the minute have gone by (`now()`, as the server reads the period: the time its
    # transaction, here the test's, began).
    FailedTokenCount.objects.filter(address="203.0.113.68").update(
        period_ends=RawSQL("now() + interval '20 seconds'", [])
    )

    refused = guesser.get(JOBS, HTTP_AUTHORIZATION=good)
    error = assert_error(refused, 429, "rate_limited")
    left = int(refused["Retry-After"])
    assert left == 20
    assert error["message"] == f"Too many failed token attempts from this address: wait {left} s."


def test_successful_token_use_is_not_counted(settings, viewer_client):
    settings.API_TOKEN_FAILURE_LIMIT = "3/min"
    for _ in range(10):
        assert viewer_client.get(JOBS).status_code == 200


def test_an_ended_period_counts_for_nothing_and_the_next_failure_deletes_it(
    settings, viewer_client
):
    settings.API_TOKEN_FAILURE_LIMIT = "3/min"
    good = viewer_client._credentials["HTTP_AUTHORIZATION"]
    ended = timezone.now() - timedelta(seconds=1)
    FailedTokenCount.objects.create(address="203.0.113.70", failures=99, period_ends=ended)
    returning = APIClient(REMOTE_ADDR="203.0.113.70")
    assert returning.get(JOBS, HTTP_AUTHORIZATION=good).status_code == 200

    guess = APIClient(REMOTE_ADDR="203.0.113.71").get(JOBS, HTTP_AUTHORIZATION="Bearer jsk_x")
    assert_error(guess, 401, "not_authenticated")
    assert dict(FailedTokenCount.objects.values_list("address", "failures")) == {"203.0.113.71": 1}


def test_an_empty_bearer_header_is_a_failed_attempt(settings):
    settings.API_TOKEN_FAILURE_LIMIT = "2/min"
    client = APIClient(REMOTE_ADDR="203.0.113.72")
    answers = [client.get(JOBS, HTTP_AUTHORIZATION="Bearer ") for _ in range(3)]
    assert [answer.status_code for answer in answers] == [401, 401, 429]


def test_another_scheme_is_no_failed_attempt_and_a_session_still_counts(settings, viewer):
    # A browser behind a proxy with Basic authentication sends its header on every request:
    # the console's own calls and event stream were 401, and ten pages locked the address.
    settings.API_TOKEN_FAILURE_LIMIT = "2/min"
    signed_in = APIClient(REMOTE_ADDR="203.0.113.73")
    signed_in.force_login(viewer)
    answers = [signed_in.get(JOBS, HTTP_AUTHORIZATION="Basic eDp5") for _ in range(3)]
    assert [answer.status_code for answer in answers] == [200, 200, 200]
    anonymous = APIClient(REMOTE_ADDR="203.0.113.73").get(JOBS, HTTP_AUTHORIZATION="Basic eDp5")
    assert_error(anonymous, 401, "not_authenticated")
    assert not FailedTokenCount.objects.exists()
