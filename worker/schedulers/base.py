"""The scheduler interface and the entry it orders."""

from __future__ import annotations

import abc
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from jobs.scheduling import PRIORITY_WEIGHT, virtual_deadline

# Times count from year 1 so they are never negative and pack without borrowing.
_EPOCH = datetime(1, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
# `virtual_deadline` in integer microseconds, for the packed key (the conformance suite
# orders its oracle with `virtual_deadline` itself).
_WEIGHT_US = PRIORITY_WEIGHT // _MICROSECOND
# Microseconds up to year 9999 fit in 59 bits; a UUID is 128 bits.
_CREATED_SHIFT = 128
_DEADLINE_SHIFT = 128 + 64
ID_MASK = (1 << 128) - 1

# (virtual deadline, created_at, id) packed in one integer, most significant first:
# deadline << 192 | created << 128 | uuid.int. Comparing two of them is one C-level integer
# comparison, against a loop of per-item comparisons for a tuple, which halves heap costs.
SortKey = int


def _microseconds(value: datetime, name: str) -> int:
    if value.tzinfo is None:
        raise ValueError(f"{name} must be timezone-aware, got {value!r}")
    return (value - _EPOCH) // _MICROSECOND


def _as_datetime(value: Any, name: str) -> datetime:
    # The API's job object carries ISO 8601 strings; database rows carry datetimes.
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if not isinstance(value, datetime):
        raise TypeError(f"{name} must be a datetime or an ISO 8601 string, got {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class ScheduledJob:
    """A runnable job as the in-memory scheduler sees it.

    Ordered by `key`: earliest virtual deadline (`ready_at + priority x 20 min`), then earliest
    `created_at`, then id. The key is computed once here so that the structures compare plain
    integers and allocate nothing per operation; `key & ID_MASK == job_id.int`.
    """

    job_id: uuid.UUID
    priority: int
    ready_at: datetime
    created_at: datetime
    # What the worker's prefetch weighs a job by (its type's recent handler time); not
    # part of the order. Empty when unknown: such a job is never prefetched.
    type: str = field(default="", compare=False)
    key: SortKey = field(init=False, repr=False, compare=False)
    # `job_id.int`, the structures' index key, held here to spare a hop through the UUID.
    int_id: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        deadline = _microseconds(self.ready_at, "ready_at") + self.priority * _WEIGHT_US
        created = _microseconds(self.created_at, "created_at")
        int_id = self.job_id.int
        object.__setattr__(
            self, "key", deadline << _DEADLINE_SHIFT | created << _CREATED_SHIFT | int_id
        )
        object.__setattr__(self, "int_id", int_id)

    @property
    def virtual_deadline(self) -> datetime:
        return virtual_deadline(self.priority, self.ready_at)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> ScheduledJob:
        """From a `jobs` row (columns id, priority, run_at, created_at, and type if known).
        Values may be the database's (UUID, datetime) or the API's (strings): `run_at` is the
        ready time."""
        job_id = row["id"]
        return cls(
            job_id=job_id if isinstance(job_id, uuid.UUID) else uuid.UUID(str(job_id)),
            priority=int(row["priority"]),
            ready_at=_as_datetime(row["run_at"], "run_at"),
            created_at=_as_datetime(row["created_at"], "created_at"),
            type=str(row.get("type") or ""),
        )


class JobScheduler(abc.ABC):
    """A priority queue of `ScheduledJob`s, most urgent (smallest `key`) first.

    - `insert` of a job id already held REPLACES the held entry (a job that comes back with a
      new ready time, e.g. after a retry, must be ordered by the new one); re-inserting an
      identical entry changes nothing.
    - `pop` on an empty scheduler raises IndexError, like `list.pop`.
    - A job that leaves the queue elsewhere (claimed by another worker, cancelled) is not
      removed: the claim of a popped job that is no longer runnable just finds nothing.
    """

    name: str
    __slots__ = ()

    @abc.abstractmethod
    def insert(self, entry: ScheduledJob) -> None: ...

    @abc.abstractmethod
    def pop(self) -> ScheduledJob: ...

    @abc.abstractmethod
    def __len__(self) -> int: ...

    @abc.abstractmethod
    def __contains__(self, job_id: object) -> bool: ...
