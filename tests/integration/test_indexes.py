"""Every index on `jobs`, `job_attempts` and `job_logs` is one ARCHITECTURE.md lists beside
what uses it ("Every index and what uses it"): an index nothing reads costs a write on
every transition, so a new one must say what it is for."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

pytestmark = pytest.mark.django_db


def documented_indexes() -> set[str]:
    text = (Path(settings.BASE_DIR) / "ARCHITECTURE.md").read_text()
    section = text.split("### Every index and what uses it", 1)[1].split("\n### ", 1)[0]
    return {name.removesuffix("…") for name in re.findall(r"^\| `([\w…]+)` \|", section, re.M)}


def test_every_index_of_the_job_tables_is_documented_with_its_use() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname FROM pg_indexes"
            " WHERE tablename IN ('jobs', 'job_attempts', 'job_logs')"
        )
        indexes = {name for (name,) in cursor.fetchall()}
    documented = documented_indexes()
    undocumented = {name for name in indexes if not any(name.startswith(doc) for doc in documented)}
    assert undocumented == set()
    gone = {doc for doc in documented if not any(name.startswith(doc) for name in indexes)}
    assert gone == set()
    # The duplicates are gone: one index per column list.
    assert not {name for name in indexes if re.fullmatch(r"job_attempts_job_id_\w+", name)}
