"""A binary min-heap in a flat list, with lazy deletion and deferred sifting."""

from __future__ import annotations

import uuid
from heapq import heapify, heappop, heappush

from .base import ID_MASK, JobScheduler, ScheduledJob, SortKey

# Below this many slots a rebuild is not worth its O(n); stale keys just wait to surface.
_MIN_REBUILD_SIZE = 64


class MinHeapScheduler(JobScheduler):
    """`heapq` over the entries' precomputed integer keys, plus a dict id -> live entry.

    The heap holds only the keys the entries already carry: insert allocates nothing, pop only
    the id it masks out of the key to find the entry.

    Lazy deletion: a replacing `insert` (a job back with a new ready time) only replaces the
    entry in the dict. The old key stays in the heap as a stale slot, recognised when it
    surfaces because the live entry for that id no longer owns that very key object (an
    identity check, so a re-inserted equal entry is never confused with its replaced twin).
    As in asyncio's timer heap, stale slots are dropped when they reach the head and the heap
    is rebuilt once they are more than half of it.

    Deferred sifting: `insert` appends the key to an arrivals list and the next `pop` merges
    them, with one O(n) `heapify` when they are many (a feeder loading a batch) and a
    `heappush` each when they are few. The order seen from outside is the same; a batch of n
    costs O(n) instead of O(n log n) worst case.
    """

    name = "heap"
    __slots__ = ("_arrivals", "_heap", "_live")

    def __init__(self) -> None:
        self._heap: list[SortKey] = []
        self._arrivals: list[SortKey] = []
        self._live: dict[int, ScheduledJob] = {}

    def insert(self, entry: ScheduledJob) -> None:
        key = entry.key
        held = self._live.setdefault(entry.int_id, entry)
        if held is entry:
            self._arrivals.append(key)
        elif held != entry:
            self._live[entry.int_id] = entry
            self._arrivals.append(key)
            self._compact()

    def pop(self) -> ScheduledJob:
        if self._arrivals:
            self._merge()
        heap = self._heap
        live = self._live
        while heap:
            key = heappop(heap)
            entry = live.pop(key & ID_MASK, None)
            if entry is not None:
                if entry.key is key:
                    return entry
                live[key & ID_MASK] = entry
        raise IndexError("pop from an empty scheduler")

    def _merge(self) -> None:
        # Arrivals can be stale too (the same entry object inserted twice, then popped once).
        self._compact()
        heap = self._heap
        arrivals = self._arrivals
        # heapify costs about 2 comparisons per slot of the whole heap; a push about 2 for a
        # random key, log n at worst: re-heapify once the arrivals are a sizeable share.
        if len(arrivals) * 4 > len(heap):
            heap.extend(arrivals)
            heapify(heap)
        else:
            for key in arrivals:
                heappush(heap, key)
        arrivals.clear()

    def _compact(self) -> None:
        live = self._live
        slots = len(self._heap) + len(self._arrivals)
        if slots > _MIN_REBUILD_SIZE and slots > 2 * len(live):
            self._heap = [entry.key for entry in live.values()]
            heapify(self._heap)
            self._arrivals.clear()

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, job_id: object) -> bool:
        return isinstance(job_id, uuid.UUID) and job_id.int in self._live
