"""The API's only body parser: strict JSON, size-capped, with the envelope's error codes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

from django.conf import settings
from rest_framework.exceptions import ValidationError
from rest_framework.parsers import BaseParser

from jobs import limits

from .errors import MalformedJSON, PayloadTooLarge


class JSONBodyParser(BaseParser):
    """Reads at most `API_MAX_BODY_BYTES` (+1 to notice more) whatever Content-Length said.

    Each field of the body keeps to the JSON limits of `jobs.limits` (depth, no lone
    surrogate): a deep or unencodable value is refused here, under its field's name, before
    anything recurses into it or tries to print it. NUL is left to the field's own rules.
    """

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
            body = limits.loads(raw.decode("utf-8"))
        except limits.JsonLimitError as exc:
            raise ValidationError({"non_field_errors": [f"The body: {exc}."]}) from exc
        except (UnicodeDecodeError, ValueError) as exc:
            raise MalformedJSON(f"The request body is not valid JSON: {exc}.") from exc
        fields = body.items() if isinstance(body, dict) else [("non_field_errors", body)]
        errors = {}
        for key, value in fields:
            name = limits.printable(key)
            messages = limits.json_errors(key, name=f"{name} (name)", nul=False)
            messages += limits.json_errors(value, name=name, nul=False)
            if messages:
                errors[name] = messages
        if errors:
            raise ValidationError(errors)
        return body
