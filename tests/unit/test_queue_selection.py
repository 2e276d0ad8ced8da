"""The queues a worker serves, and the queues any of several workers serve."""

from __future__ import annotations

import pytest

from jobs.queue_names import QueueSelection

QUEUES = ("default", "emails", "reports", "webhooks")
EVERY = QueueSelection()
LANE = QueueSelection(only=("webhooks",))
BESIDE_LANE = QueueSelection(excluded=("webhooks",))


@pytest.mark.parametrize(
    "selections",
    [
        [],
        [EVERY],
        [LANE],
        [BESIDE_LANE],
        [BESIDE_LANE, LANE],
        [BESIDE_LANE, QueueSelection(excluded=("webhooks", "reports"))],
        [QueueSelection(excluded=("reports",)), QueueSelection(only=("reports", "emails"))],
        [QueueSelection(only=("emails", "reports"), excluded=("reports",)), LANE],
    ],
)
def test_the_union_serves_what_any_of_them_serves(selections: list[QueueSelection]) -> None:
    union = QueueSelection.union(selections)
    for queue in QUEUES:
        assert union.serves(queue) == any(s.serves(queue) for s in selections), queue
