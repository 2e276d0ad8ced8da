"""A refused time zone name is quoted within the longest a schedule stores."""

from __future__ import annotations

import pytest

JOBS = "/api/v1/jobs"
SCHEDULES = "/api/v1/schedules"


@pytest.mark.django_db
def test_an_unknown_time_zone_of_5000_characters_is_not_sent_back_whole(operator_client):
    # The 400 quoted the whole name: 5,167 bytes of error for a field no zone name fills
    # past 64 characters, as type names once came back whole.
    zone = "Europe/" + "x" * 5000
    body = {"type": "noop", "payload": {}, "priority": 2, "cron": "0 0 * * *", "timezone": zone}
    response = operator_client.post(JOBS, body, format="json")
    assert response.status_code == 400
    (message,) = response.json()["error"]["details"]["timezone"]
    assert message.startswith("Unknown time zone 'Europe/xxx")
    assert "characters cut" in message
    assert len(message) < 200
    assert operator_client.get(SCHEDULES).json()["count"] == 0
