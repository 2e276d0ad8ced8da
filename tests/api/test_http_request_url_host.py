"""An `http_request` job whose URL names a host no request can reach is refused when it is
created, in `jobs.outbound.sendable_url`'s words, not accepted to fail every attempt into the
dead-letter queue: the schema's pattern states the scheme and the characters, IDNA the host."""

from __future__ import annotations

import pytest

from jobs.models import Job

from .test_job_routes import assert_error

pytestmark = pytest.mark.django_db

JOBS = "/api/v1/jobs"
LONG_LABEL = "a" * 64

UNREACHABLE = [
    ("https://a..b/x", "Its host 'a..b' has an empty label."),
    (
        f"https://{LONG_LABEL}.example/x",
        f"Its host '{LONG_LABEL}.example' has a label over 63 characters.",
    ),
    (
        "http://¼.example/hook",
        "Its host '¼.example' is not a name IDNA can encode: Codepoint U+2044 at position 2 "
        "of '1\N{FRACTION SLASH}4' not allowed.",
    ),
    ("http://exa<mple.com/hook", "Its host 'exa<mple.com' holds '<', which no host name can."),
    ("https:///hook", "Names no host after https://."),
    (
        "http://example.com:99999/hook",
        "Its port 99999 is no port a request can reach: use 1 to 65535, or leave it out for "
        "the scheme's default.",
    ),
    # Every attempt was refused ("Connection refused") until the job was dead-lettered.
    (
        "http://example.com:0/hook",
        "Its port 0 is no port a request can reach: use 1 to 65535, or leave it out for "
        "the scheme's default.",
    ),
    (
        "https://[2001:db8::1]:00/hook",
        "Its port 00 is no port a request can reach: use 1 to 65535, or leave it out for "
        "the scheme's default.",
    ),
    (
        "http://example.com:8o/hook",
        "Its host or port cannot be read: Port could not be cast to integer value as '8o'.",
    ),
]


def http_request(url: str) -> dict[str, object]:
    return {"type": "http_request", "payload": {"url": url}, "priority": 2}


@pytest.mark.parametrize(("url", "message"), UNREACHABLE)
def test_an_http_request_to_a_host_no_request_can_reach_is_refused_naming_why(
    operator_client, url, message
):
    response = operator_client.post(JOBS, http_request(url), format="json")
    error = assert_error(response, 400, "validation_error")
    assert error["details"] == {"payload.url": [message]}
    assert not Job.objects.exists()


def test_a_batch_names_each_http_request_whose_host_no_request_can_reach(operator_client):
    (first_url, first), (second_url, second) = UNREACHABLE[:2]
    submitted = [
        http_request("https://example.com/fine"),
        http_request(first_url),
        {"type": "noop", "payload": {}, "priority": 2},
        http_request(second_url),
    ]
    response = operator_client.post(f"{JOBS}/batch", {"jobs": submitted}, format="json")
    error = assert_error(response, 400, "validation_error")
    assert error["details"] == {"jobs.1.payload.url": [first], "jobs.3.payload.url": [second]}
    assert not Job.objects.exists()


@pytest.mark.parametrize(
    "url",
    [
        "https://例え.テスト/パス",
        "https://faß.de/hook",
        "http://receiver:8080/hook",
        "https://exa_mple.com/hook",
        "https://[2001:db8::1]:8443/hook",
        "http://example.com:1/hook",
        "http://example.com:65535/hook",
    ],
)
def test_an_http_request_to_a_host_a_request_can_reach_is_created(operator_client, url):
    response = operator_client.post(JOBS, http_request(url), format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["payload"] == {"url": url}
