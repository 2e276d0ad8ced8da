"""Finishing one claimed attempt as failed, as the worker reports a batch of failures."""

from __future__ import annotations

import uuid
from datetime import timedelta

from django.utils import timezone

from jobs import state
from jobs.state import JobObject


def fail_attempt(
    job_id: uuid.UUID,
    attempt_id: uuid.UUID,
    *,
    error_type: str,
    error_message: str,
    stack_trace: str | None,
    retry_delay: timedelta,
) -> JobObject | None:
    """The failed job's object; None when the attempt had lost its claim."""
    failure = state.Failure(
        job_id,
        attempt_id,
        error_type=error_type,
        error_message=error_message,
        stack_trace=stack_trace,
        retry_delay=retry_delay,
        finished_at=timezone.now(),
    )
    failed = state.fail([failure]).failed
    return failed[0] if failed else None
