"""A binary min-heap in a flat list, with lazy deletion."""

from __future__ import annotations

import uuid
from heapq import heapify, heappop, heappush

from .base import JobScheduler, ScheduledJob, SortKey

# Below this many slots a rebuild is not worth its O(n); stale keys just wait to surface.
_MIN_REBUILD_SIZE = 64


class MinHeapScheduler(JobScheduler):
    """`heapq` over the entries' precomputed key tuples, plus a dict id -> live entry.

    The heap holds only the key tuples the entries already carry, so insert and pop allocate
    nothing. `remove` and a replacing `insert` only forget the entry in the dict: its key stays
    in the heap as a stale slot, recognised when it surfaces because the live entry for that id
    no longer owns that very tuple (an identity check, so a re-inserted equal entry is never
    confused with its removed twin). As in asyncio's timer heap, stale slots are dropped when
    they reach the head and the heap is rebuilt once they are more than half of it.
    """

    name = "heap"
    __slots__ = ("_heap", "_live")

    def __init__(self) -> None:
        self._heap: list[SortKey] = []
        self._live: dict[int, ScheduledJob] = {}

    def insert(self, entry: ScheduledJob) -> None:
        key = entry.key
        held = self._live.setdefault(key[2], entry)
        if held is not entry:
            if held.key == key:
                return
            self._live[key[2]] = entry
            self._compact()
        heappush(self._heap, key)

    def pop(self) -> ScheduledJob:
        heap = self._heap
        live = self._live
        while heap:
            key = heappop(heap)
            entry = live.pop(key[2], None)
            if entry is not None:
                if entry.key is key:
                    return entry
                live[key[2]] = entry
        raise IndexError("pop from an empty scheduler")

    def peek(self) -> ScheduledJob | None:
        heap = self._heap
        live = self._live
        while heap:
            key = heap[0]
            entry = live.get(key[2])
            if entry is not None and entry.key is key:
                return entry
            heappop(heap)
        return None

    def remove(self, job_id: uuid.UUID) -> bool:
        if self._live.pop(job_id.int, None) is None:
            return False
        self._compact()
        return True

    def _compact(self) -> None:
        live = self._live
        if len(self._heap) > _MIN_REBUILD_SIZE and len(self._heap) > 2 * len(live):
            self._heap = [entry.key for entry in live.values()]
            heapify(self._heap)

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, job_id: object) -> bool:
        return isinstance(job_id, uuid.UUID) and job_id.int in self._live
