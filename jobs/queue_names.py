"""Queue names and the queues a worker serves: the rules the job, its type's registration
and the worker share (`jobs.queues` holds what is decided about a queue)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

DEFAULT_QUEUE = "default"
# Safe in a URL path segment and a command-line list: no slash, comma or `=`, and not dots
# alone: "." and ".." are the segments clients and proxies normalise away, so a queue of
# that name could be filled but never paused, resumed or read. One pattern for Python, the
# model's validator and the OpenAPI schema (a lookahead both read the same).
QUEUE_NAME_PATTERN = r"^(?!\.+$)[A-Za-z0-9_.:-]{1,100}$"
_NAME = re.compile(QUEUE_NAME_PATTERN)
NAME_RULE = "1 to 100 letters, digits, '_', '-', '.' or ':', not dots alone."
# What a refused name is told, wherever it is named (the API's fields and paths, the console,
# `runworker`; the Queue model's validator, which the admin uses, says the same): the rule
# itself, never only that a pattern was not matched.
INVALID_NAME = f"A queue name is {NAME_RULE}"


def name_errors(name: object) -> list[str]:
    """Why `name` cannot name a queue; empty when it can."""
    # fullmatch: the pattern's `$` would also let a final newline through.
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        return [INVALID_NAME]
    return []


@dataclass(frozen=True)
class QueueSelection:
    """The queues a worker serves: `only` these (None: all) except `excluded` (the queues
    that have handler slots of their own elsewhere)."""

    only: tuple[str, ...] | None = None
    excluded: tuple[str, ...] = ()

    def serves(self, name: str) -> bool:
        return (self.only is None or name in self.only) and name not in self.excluded

    def params(self) -> dict[str, Any]:
        """The `queues` and `other_queues` parameters of `claim_jobs` and `runnable_jobs`."""
        return {
            "queues": list(self.only) if self.only is not None else None,
            "other_queues": list(self.excluded),
        }

    @staticmethod
    def union(selections: Iterable[QueueSelection]) -> QueueSelection:
        """The queues at least one of `selections` serves (none of none)."""
        selections = list(selections)
        named = set().union(*(set(s.only) - set(s.excluded) for s in selections if s.only))
        open_ended = [set(s.excluded) for s in selections if s.only is None]
        if not open_ended:
            return QueueSelection(tuple(sorted(named)))
        return QueueSelection(None, tuple(sorted(set.intersection(*open_ended) - named)))

    def __str__(self) -> str:
        served = ",".join(self.only) if self.only is not None else "all"
        return served + "".join(f" -{name}" for name in self.excluded)


ALL_QUEUES = QueueSelection()
