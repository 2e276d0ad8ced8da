"""What the console shows of text it does not control: passwords in a URL's query are masked,
and characters that reorder text (bidirectional controls) are shown as escapes, so a value
cannot pass for another, while what is stored keeps them."""

from __future__ import annotations

import html
import json
import re
from typing import Any
from urllib.parse import urlencode

import pytest
from django.test import Client

from jobs.console.selectors import MASK, mask_value
from jobs.display import shown_json
from jobs.models import Job, Webhook

from .helpers import dead_letter, text

pytestmark = pytest.mark.django_db

# Right-to-left override ... pop: shown raw, "evil" reads "live".
SPOOFED = "\u202eevil\u202c"
BIDI_CONTROLS = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


@pytest.mark.parametrize(
    ("name", "value", "shown"),
    [
        (
            "REDIS_URL",
            "unix:///run/redis.sock?db=0&password=s3cret",
            f"unix:///run/redis.sock?db=0&password={MASK}",
        ),
        (
            "DATABASE_URL",
            "postgres://app@db.internal/jobs?sslmode=require&Password=s3cret",
            f"postgres://app@db.internal/jobs?sslmode=require&Password={MASK}",
        ),
        (
            "REDIS_URL",
            "rediss://cache:6380/0?pass=a&secret=b&token=c&key=d&sslpassword=e&db=1",
            f"rediss://cache:6380/0?pass={MASK}&secret={MASK}&token={MASK}&key={MASK}"
            f"&sslpassword={MASK}&db=1",
        ),
        (
            "DATABASE_URL",
            "postgres://app:hunter2@[2001:db8::1]:5432/jobs",
            f"postgres://app:{MASK}@[2001:db8::1]:5432/jobs",
        ),
        (
            "DATABASE_URL",
            "postgres://app:hunter2@%2Fvar%2Frun%2Fpostgresql/jobs?password=again",
            f"postgres://app:{MASK}@%2Fvar%2Frun%2Fpostgresql/jobs?password={MASK}",
        ),
        ("REDIS_URL", "unix:///run/redis.sock?db=0", "unix:///run/redis.sock?db=0"),
        ("SCHEDULER_EVENTS_CHANNEL", "scheduler:events:jobs:0", "scheduler:events:jobs:0"),
    ],
)
def test_a_password_in_a_urls_query_is_masked_as_in_its_user_info(
    name: str, value: str, shown: str
) -> None:
    assert mask_value(name, value) == shown


def test_the_settings_page_shows_no_password_given_in_a_query(viewer: Any, settings: Any) -> None:
    settings.REDIS_URL = "unix:///run/redis.sock?db=0&password=s3cret"
    settings.DATABASE_URL = "postgres://app:hunter2@[::1]:5432/jobs?sslpassword=keyphrase"
    client = Client()
    client.force_login(viewer)
    body = html.unescape(text(client.get("/settings")))
    for secret in ("s3cret", "hunter2", "keyphrase"):
        assert secret not in body
    assert f"unix:///run/redis.sock?db=0&password={MASK}" in body
    assert f"postgres://app:{MASK}@[::1]:5432/jobs?sslpassword={MASK}" in body


def test_shown_json_shows_bidi_controls_as_the_escapes_json_reads_back() -> None:
    value = {"name": SPOOFED, BIDI_CONTROLS: [BIDI_CONTROLS]}
    shown = shown_json(value).text
    assert not set(BIDI_CONTROLS) & set(shown)
    assert '"name": "\\u202eevil\\u202c"' in shown
    assert json.loads(shown) == value


def test_a_spoofing_payload_reads_as_it_is_on_the_job_and_dlq_pages_and_stays_stored(
    as_operator: Client, settings: Any
) -> None:
    dead = dead_letter("noop", payload={"user": SPOOFED})
    settings.DEFAULT_FROM_EMAIL = f"ops{SPOOFED}@example.com"

    detail = as_operator.get(f"/dlq/{dead['id']}")
    body = text(detail)
    # The payload's panel and the edit box both: as escapes, never the raw characters.
    assert body.count("&quot;user&quot;: &quot;\\u202eevil\\u202c&quot;") == 2
    assert "\u202e" not in body
    settings_page = text(as_operator.get("/settings"))
    assert "ops\\u202eevil\\u202c@example.com" in settings_page
    assert "\u202e" not in settings_page

    # The edit box sent back as shown retries the job with its payload unchanged.
    box = re.search(r"<textarea[^>]*>(.*?)</textarea>", body, re.S)
    assert box is not None
    as_operator.post(f"/dlq/{dead['id']}/edit", {"payload": html.unescape(box.group(1))})
    job = Job.objects.get(id=dead["id"])
    assert not job.in_dlq and job.payload == {"user": SPOOFED}
    assert "\u202e" not in text(as_operator.get(f"/jobs/{dead['id']}"))


def test_a_spoofing_error_or_webhook_url_reads_as_it_is_on_every_page_showing_it(
    as_operator: Client,
) -> None:
    """Errors are job code's text, and webhooks saved before their URLs were checked for
    bidi controls may hold one: the DLQ, its detail and confirmation pages and the settings
    page show them as escapes."""
    dead = dead_letter("noop", error=f"refused by {SPOOFED}")
    Webhook.objects.create(url=f"https://example.com/{SPOOFED}", event_types=["job.failed"])
    signature = Job.objects.get(id=dead["id"]).error_signature
    pages = {
        "dlq": "/dlq",
        "dlq group": "/dlq?" + urlencode({"signature": signature}),
        "detail": f"/dlq/{dead['id']}",
        "confirm": "/dlq/empty",
        "settings": "/settings",
        "dashboard": "/",
    }
    for name, url in pages.items():
        # A form's hidden field carries the signature back as stored: it is not shown.
        body = re.sub(r'<input type="hidden"[^>]*>', "", text(as_operator.get(url)))
        assert "\u202e" not in body, name
        assert "\\u202eevil\\u202c" in body, name
