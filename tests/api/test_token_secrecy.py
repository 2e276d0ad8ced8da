"""A bearer token is stored as its SHA-256 only, and appears in no log line and no answer,
whatever the answer: success, 401, 403, 404, 405, 429 or 500."""

from __future__ import annotations

import hashlib
import logging
import uuid
from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

from jobs.api.auth import issue_token
from jobs.logging import JsonFormatter
from jobs.models import ApiToken

pytestmark = pytest.mark.django_db


def test_a_token_is_stored_as_its_hash_and_never_logged_nor_echoed(
    viewer: Any, settings: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    settings.DEBUG = True  # Django then logs every statement with its parameters
    settings.API_TOKEN_FAILURE_LIMIT = "3/min"
    token = issue_token(viewer)
    stored = ApiToken.objects.get(user=viewer)
    assert stored.key_hash == hashlib.sha256(token.encode()).hexdigest()
    with connection.cursor() as cursor:
        cursor.execute("SELECT api_tokens::text FROM api_tokens")
        assert token not in cursor.fetchone()[0]

    def broken() -> dict[str, int]:
        raise RuntimeError("stats are broken")

    monkeypatch.setattr("jobs.api.views.current_stats", broken)
    good, bad = APIClient(), APIClient()
    good.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    bad.credentials(HTTP_AUTHORIZATION=f"Bearer {token}x")
    answers = []
    with caplog.at_level(logging.DEBUG), caplog.at_level(logging.DEBUG, "django.db.backends"):
        answers.append(good.get("/api/v1/jobs"))
        answers.append(good.get(f"/api/v1/jobs/{uuid.uuid4()}"))
        answers.append(good.post("/api/v1/jobs", {"type": "noop"}, format="json"))
        answers.append(good.patch("/api/v1/jobs"))
        answers.append(good.get("/api/v1/jobs/stats"))
        answers.append(good.get("/metrics"))
        answers.append(good.get("/api/jobs/stream/status"))
        answers += [bad.get("/api/v1/jobs") for _ in range(3)]
        answers.append(good.get("/api/v1/jobs"))
    assert [a.status_code for a in answers] == [200, 404, 403, 405, 500, 200, 200, *[401] * 3, 429]
    for answer in answers:
        assert token not in answer.content.decode()
        assert all(token not in value for value in answer.headers.values())
    lines = [JsonFormatter().format(record) for record in caplog.records]
    assert any(stored.key_hash in line for line in lines), "the statements were logged"
    assert not [line for line in lines if token in line]
