import pytest

from jobs import state


@pytest.mark.django_db(transaction=True)
def test_enqueue_creates_a_pending_job_and_publishes_it(events):
    job = state.enqueue("noop", {}, priority=1)
    assert job["status"] == "pending"
    assert events.wait_for("job.created", lambda data: data["id"] == job["id"])
