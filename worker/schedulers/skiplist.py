"""A skip list: 16 levels, p = 0.5, with an index by job id."""

from __future__ import annotations

import random
import uuid

from .base import JobScheduler, ScheduledJob, SortKey

MAX_LEVEL = 16
# Above every real key (those stay below 2^256), so searches stop at the tail without a
# None check at each step.
_TAIL_KEY = 1 << 512


class _Node:
    __slots__ = ("entry", "forward", "key")

    def __init__(self, key: SortKey, entry: ScheduledJob | None, forward: list[_Node]) -> None:
        self.key = key
        self.entry = entry
        self.forward = forward


class SkipListScheduler(JobScheduler):
    """Sorted linked levels: level 0 holds every entry in key order, each higher level about
    half of the one below. pop takes the first node (O(1) expected: it unlinks from the head
    only); insert and remove search down the levels (O(log n) expected). The dict id -> node
    lets `remove` find the key to search for without scanning.
    """

    name = "skiplist"
    __slots__ = ("_head", "_index", "_level", "_rng", "_tail")

    def __init__(self, seed: int | None = None) -> None:
        self._tail = _Node(_TAIL_KEY, None, [])
        self._head = _Node(-1, None, [self._tail] * MAX_LEVEL)
        self._index: dict[int, _Node] = {}
        self._level = 1
        # Level choice only shapes performance, never the order, so any seed is correct.
        self._rng = random.Random(seed)  # noqa: S311

    def _predecessors(self, key: SortKey) -> list[_Node]:
        """For each level, the last node whose key is below `key`."""
        update = [self._head] * MAX_LEVEL
        node = self._head
        for level in range(self._level - 1, -1, -1):
            nxt = node.forward[level]
            while nxt.key < key:
                node = nxt
                nxt = node.forward[level]
            update[level] = node
        return update

    def insert(self, entry: ScheduledJob) -> None:
        held = self._index.get(entry.int_id)
        if held is not None:
            if held.entry == entry:
                return
            self._unlink(held)
        update = self._predecessors(entry.key)
        # The position of the lowest set bit: level k with probability 2^-k, capped at 16.
        bits = self._rng.getrandbits(MAX_LEVEL - 1) | (1 << (MAX_LEVEL - 1))
        level = (bits & -bits).bit_length()
        if level > self._level:
            self._level = level
        forward = [update[i].forward[i] for i in range(level)]
        node = _Node(entry.key, entry, forward)
        for i in range(level):
            update[i].forward[i] = node
        self._index[entry.int_id] = node

    def pop(self) -> ScheduledJob:
        head = self._head.forward
        node = head[0]
        if node.entry is None:
            raise IndexError("pop from an empty scheduler")
        # The first node is first on every level it stands on.
        forward = node.forward
        head[: len(forward)] = forward
        del self._index[node.entry.int_id]
        return node.entry

    def _unlink(self, node: _Node) -> None:
        update = self._predecessors(node.key)
        for i, after in enumerate(node.forward):
            update[i].forward[i] = after
        del self._index[node.entry.int_id]  # type: ignore[union-attr]
        head = self._head.forward
        while self._level > 1 and head[self._level - 1] is self._tail:
            self._level -= 1

    def __len__(self) -> int:
        return len(self._index)

    def __contains__(self, job_id: object) -> bool:
        return isinstance(job_id, uuid.UUID) and job_id.int in self._index
