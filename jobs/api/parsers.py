"""The API's only body parser: strict JSON, size-capped, with the envelope's error codes."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import IO, Any

from django.conf import settings
from rest_framework.parsers import BaseParser

from .errors import MalformedJSON, PayloadTooLarge


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


class JSONBodyParser(BaseParser):
    """Reads at most `API_MAX_BODY_BYTES` (+1 to notice more) whatever Content-Length said."""

    media_type = "application/json"

    def parse(
        self,
        stream: IO[Any],
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        limit = settings.API_MAX_BODY_BYTES
        raw = stream.read(limit + 1)
        if len(raw) > limit:
            raise PayloadTooLarge(limit)
        try:
            return json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
        except (UnicodeDecodeError, ValueError) as exc:
            raise MalformedJSON(f"The request body is not valid JSON: {exc}.") from exc
