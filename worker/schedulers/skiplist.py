"""A skip list: 16 levels, p = 0.5, with an index by job id."""

from __future__ import annotations

import random
import uuid

from .base import JobScheduler, ScheduledJob, SortKey

MAX_LEVEL = 16


class _Node:
    __slots__ = ("entry", "forward", "key")

    def __init__(self, key: SortKey | None, entry: ScheduledJob | None, level: int) -> None:
        self.key = key
        self.entry = entry
        self.forward: list[_Node | None] = [None] * level


class SkipListScheduler(JobScheduler):
    """Sorted linked levels: level 0 holds every entry in key order, each higher level about
    half of the one below. pop takes the first node (O(1) expected: it unlinks from the head
    only); insert and remove search down the levels (O(log n) expected). The dict id -> node
    lets `remove` find the key to search for without scanning.
    """

    name = "skiplist"
    __slots__ = ("_head", "_index", "_level", "_rng")

    def __init__(self, seed: int | None = None) -> None:
        self._head = _Node(None, None, MAX_LEVEL)
        self._index: dict[int, _Node] = {}
        self._level = 1
        # Level choice only shapes performance, never the order, so any seed is correct.
        self._rng = random.Random(seed)  # noqa: S311

    def _random_level(self) -> int:
        # The position of the lowest set bit: level k with probability 2^-k, capped at 16.
        bits = self._rng.getrandbits(MAX_LEVEL - 1) | (1 << (MAX_LEVEL - 1))
        return (bits & -bits).bit_length()

    def _predecessors(self, key: SortKey) -> list[_Node]:
        """For each level, the last node whose key is below `key`."""
        update = [self._head] * MAX_LEVEL
        node = self._head
        for level in range(self._level - 1, -1, -1):
            nxt = node.forward[level]
            while nxt is not None and nxt.key < key:  # type: ignore[operator]
                node = nxt
                nxt = node.forward[level]
            update[level] = node
        return update

    def insert(self, entry: ScheduledJob) -> None:
        key = entry.key
        held = self._index.get(entry.job_id.int)
        if held is not None:
            if held.entry == entry:
                return
            self._unlink(held)
        update = self._predecessors(key)
        level = self._random_level()
        if level > self._level:
            self._level = level
        node = _Node(key, entry, level)
        forward = node.forward
        for i in range(level):
            before = update[i].forward
            forward[i] = before[i]
            before[i] = node
        self._index[entry.job_id.int] = node

    def pop(self) -> ScheduledJob:
        head = self._head.forward
        node = head[0]
        if node is None:
            raise IndexError("pop from an empty scheduler")
        # The first node is first on every level it stands on.
        forward = node.forward
        for i in range(len(forward)):
            head[i] = forward[i]
        del self._index[node.entry.job_id.int]  # type: ignore[union-attr]
        return node.entry  # type: ignore[return-value]

    def peek(self) -> ScheduledJob | None:
        node = self._head.forward[0]
        return None if node is None else node.entry

    def remove(self, job_id: uuid.UUID) -> bool:
        node = self._index.get(job_id.int)
        if node is None:
            return False
        self._unlink(node)
        return True

    def _unlink(self, node: _Node) -> None:
        update = self._predecessors(node.key)  # type: ignore[arg-type]
        for i in range(len(node.forward)):
            update[i].forward[i] = node.forward[i]
        del self._index[node.entry.job_id.int]  # type: ignore[union-attr]
        while self._level > 1 and self._head.forward[self._level - 1] is None:
            self._level -= 1

    def __len__(self) -> int:
        return len(self._index)

    def __contains__(self, job_id: object) -> bool:
        return isinstance(job_id, uuid.UUID) and job_id.int in self._index
