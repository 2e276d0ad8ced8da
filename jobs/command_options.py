"""Argument types shared by the management commands of both apps (`jobs` and `worker`, which
share only the core): argparse refuses a wrong value with the option's name and these words,
before the command runs."""

from __future__ import annotations

import argparse


def positive_int(value: str) -> int:
    return _at_least(value, 1, "a positive integer")


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
