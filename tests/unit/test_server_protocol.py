"""The production protocol's lighter stand-ins for uvicorn's deques behave as the deques did."""

from __future__ import annotations

import asyncio
from collections import deque

from scheduler_project.server import Pipeline, without_deque


def test_an_event_with_list_waiters_wakes_every_waiter_and_forgets_cancelled_ones() -> None:
    async def scenario() -> tuple[list[bool], int, bool]:
        event = asyncio.Event()
        without_deque(event)
        waiters = [asyncio.create_task(event.wait()) for _ in range(3)]
        await asyncio.sleep(0)
        waiters[0].cancel()
        await asyncio.sleep(0)
        left = len(event._waiters)
        event.set()
        woken: list[bool] = list(await asyncio.gather(*waiters[1:]))
        event.clear()
        late = asyncio.create_task(event.wait())
        await asyncio.sleep(0)
        event.set()
        return woken, left, await late

    woken, left, late = asyncio.run(scenario())

    assert woken == [True, True]
    assert left == 2
    assert late is True


def test_the_pipeline_gives_requests_back_in_the_order_they_came() -> None:
    pipeline, reference = Pipeline(), deque[int]()
    for queue in (pipeline, reference):
        queue.appendleft(1)
        queue.appendleft(2)
    assert not Pipeline()
    assert [pipeline.pop(), pipeline.pop()] == [reference.pop(), reference.pop()] == [1, 2]
    assert not pipeline
