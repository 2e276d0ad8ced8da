"""Argument types shared by the management commands of both apps (`jobs` and `worker`, which
share only the core): argparse refuses a wrong value with the option's name and these words,
before the command runs."""

from __future__ import annotations

import argparse

# Handler threads of one worker process (`--concurrency`, each `--queue NAME=N`,
# `SCHEDULER_CONCURRENCY`), all started at once: past this the host's limit on threads
# decides, not the work (a typo of 99999999999 took every thread the host had, then failed
# with "can't start new thread"). More work at once is more worker processes.
MOST_HANDLER_SLOTS = 1000


def positive_int(value: str) -> int:
    return _at_least(value, 1, "a positive integer")


def handler_slots(value: str) -> int:
    slots = positive_int(value)
    if slots > MOST_HANDLER_SLOTS:
        raise argparse.ArgumentTypeError(
            f"expected at most {MOST_HANDLER_SLOTS} handler slots a process, got {value!r}: "
            "run more worker processes instead"
        )
    return slots


def non_negative_int(value: str) -> int:
    return _at_least(value, 0, "an integer of 0 or more")


def _at_least(value: str, least: int, what: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = least - 1
    if number < least:
        raise argparse.ArgumentTypeError(f"expected {what}, got {value!r}")
    return number
