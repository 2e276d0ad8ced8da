"""Content negotiation: DRF's, except that a `format` no renderer writes is a 400 naming the
formats there are (DRF answers a bare 404, as if the route were gone)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rest_framework.exceptions import ValidationError
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer


class ContentNegotiation(DefaultContentNegotiation):
    def filter_renderers(
        self, renderers: Iterable[BaseRenderer], format: Any
    ) -> list[BaseRenderer]:
        offered = list(renderers)
        kept = [renderer for renderer in offered if renderer.format == format]
        if not kept:
            formats = " or ".join(str(renderer.format) for renderer in offered)
            raise ValidationError({"format": [f"{format!r} is not a format here: use {formats}."]})
        return kept
